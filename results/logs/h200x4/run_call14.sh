#!/bin/bash
# 4 x H200 (the next call): gemm_reduce_scatter's auto after the fused-kernel GEMM cost (two_streams at 1024 x 8192 x
# 8192, 2048 x 4096 x 14336, 4864 x 4096 x 8256; fused at 2048 x 8192 x 8192), beside fused and its peers, W = 4;
# all_reduce at 1024 x 8192 x 8192 in fused on 84 / 100 / 116 GEMM programs (116 measured 7% ahead of auto's 84 in
# waves-87f5d44) beside the family's peers; then at W = 2 (GPUs 0,1) gemm_reduce_scatter 4096 x 8192 x 28672, whose
# pick moved from fused to two_streams, unmeasured. Last, the copy engine's row-following schedules with the GEMM's
# tiles walked in groups of one owner's tile rows (--gsize_m; default 8, which at M / BLK_M <= 8 walks every row
# together, so no owner's rows complete before the GEMM's end): gemm_reduce_scatter and all_scatter copy_engine at
# GSIZE_CELLS (W = 4, then W = 2 on GPUs 0,1), gsize 8 against one owner's tile rows (logs/h200x1/gsize-3900295:
# the GEMM alone +0-1.5% at 4, +2-4% at 2, +5-8% at 1).
# Usage: STREAMK_PGAS_COMMIT=<sha> bash results/logs/h200x4/run_call14.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
for s in ${RS_SHAPES:-1024x8192x8192 2048x4096x14336 4864x4096x8256 2048x8192x8192}; do
  NP=4 TAG=rs ALGORITHMS=gemm_reduce_scatter MODES=auto,fused,two_streams ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 \
    BENCH_ARGS="--timeout_s 5" SHOW=3 overlap $s > /dev/null
  NP=4 COLLECTIVE=gemm_reduce_scatter REF_TIMEOUT=100 ITERS=20 WARMUP=5 reference $s > /dev/null
done
NP=4 TAG=ar ALGORITHMS=all_reduce MODES=fused GEMM_SMS=84,100,116 ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 \
  BENCH_ARGS="--timeout_s 5" SHOW=3 overlap 1024x8192x8192 > /dev/null
NP=4 TAG=ar ALGORITHMS=all_reduce MODES=auto ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=60 \
  BENCH_ARGS="--timeout_s 5" SHOW=3 overlap 1024x8192x8192 > /dev/null
NP=4 COLLECTIVE=one_shot REF_TIMEOUT=100 ITERS=20 WARMUP=5 reference 1024x8192x8192 > /dev/null
CUDA_VISIBLE_DEVICES=0,1 NP=2 TAG=rs_w2 ALGORITHMS=gemm_reduce_scatter MODES=auto,fused,two_streams,copy_engine \
  ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=120 BENCH_ARGS="--timeout_s 5" SHOW=4 overlap 4096x8192x28672 > /dev/null
gs_ab() {  # gs_ab NP SHAPE GSIZE: both row-following algorithms in copy_engine, gsize 8 and GSIZE
  for g in 8 $3; do
    NP=$1 TAG=gs$g ALGORITHMS=gemm_reduce_scatter,all_scatter MODES=copy_engine ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 \
      BENCH_ARGS="--gsize_m $g --timeout_s 5" SHOW=3 overlap $2 > /dev/null
  done
}
gs_ab 4 1024x8192x8192 2
gs_ab 4 512x8192x8192 1
gs_ab 4 2048x8192x8192 4
(export CUDA_VISIBLE_DEVICES=0,1; gs_ab 2 1024x8192x8192 4)
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
grep -E "^(all_reduce|gemm_reduce_scatter|all_scatter) /|back to back" $WORK/overlap.txt | paste - - | sed 's/ bf16, world \([24]\), gemm_sms/ W\1 g/; s/ of 132.*back to back/:/; s/ms\/step.*//'
grep -E "W=[24]:" $WORK/reference.txt | grep -o "^[a-z_0-9]* .*W=[24]\|back to back [0-9.]* ms"
