#!/bin/bash
# 4 x H200: can the reduce family's small-M cells overlap? all_reduce in fused / two_streams with GEMM tiles that
# make more than one wave (128 x 128: 2 waves of 128 at M = 512) and Stream-K hybrid schedules, beside auto
# (fused_sequential, one wave of 128 x 256 tiles) and the family's peers in the same call. W = 4.
# Usage: STREAMK_PGAS_COMMIT=<sha> SHAPES="..." bash results/logs/h200x4/run_call13.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
for s in ${SHAPES:-}; do
  NP=4 TAG=auto ALGORITHMS=all_reduce MODES=auto ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=60 \
    BENCH_ARGS="--timeout_s 5" SHOW=2 overlap $s > /dev/null
  NP=4 TAG=t128 ALGORITHMS=all_reduce MODES=fused,two_streams GEMM_SMS=116,124 ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=120 \
    BENCH_ARGS="--BLK_M 128 --BLK_N 128 --schedule dp,hybrid --timeout_s 5" SHOW=2 overlap $s > /dev/null
  NP=4 TAG=t256 ALGORITHMS=all_reduce MODES=fused,two_streams GEMM_SMS=100,116 ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 \
    BENCH_ARGS="--schedule hybrid --timeout_s 5" SHOW=2 overlap $s > /dev/null
  NP=4 COLLECTIVE=one_shot REF_TIMEOUT=100 ITERS=20 WARMUP=5 reference $s > /dev/null
done
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
grep -E "^all_reduce /|back to back|FAIL" $WORK/overlap.txt | paste - - | sed 's/ bf16, world 4, gemm_sms/ g/; s/ of 132, tiles/ tiles/; s/backend cuda.*back to back/:/; s/ms\/step.*//'
grep -E "W=4:" $WORK/reference.txt | grep -o "^[a-z_0-9]* .*W=4\|back to back [0-9.]* ms"
