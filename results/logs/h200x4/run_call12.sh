#!/bin/bash
# 4 x H200: the W = 2 cells where the planner's pick changed with its copy-engine model (all_gather_gemm at W2_A,
# gemm_reduce_scatter at W2_B), every mode and auto, on two GPU pairs at once, each pair's peers after it.
# Usage: STREAMK_PGAS_COMMIT=<sha> W2_A="2048x8192x8192" W2_B="2048x4096x14336" bash results/logs/h200x4/run_call12.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
w2() {  # w2 GPUS NAME ALGORITHM SHAPES
  export CUDA_VISIBLE_DEVICES=$1 WORK=$WORK/$2
  mkdir -p $WORK
  for s in $4; do
    NP=2 TAG=w2m ALGORITHMS=$3 MODES=auto,bulk_sync,two_streams,fused,fused_sequential,copy_engine ITERS=20 WARMUP=5 \
      OVERLAP_TIMEOUT=150 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $s > /dev/null
    NP=2 COLLECTIVE=$3 REF_TAG=reference_w2 REF_TIMEOUT=120 ITERS=20 WARMUP=5 reference $s > /dev/null
  done
}
(w2 0,1 w2_gpu01 all_gather_gemm "${W2_A:-}") &
(w2 2,3 w2_gpu23 gemm_reduce_scatter "${W2_B:-}") &
wait
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
for d in w2_gpu01 w2_gpu23; do cp $WORK/$d/overlap.txt $OUT/overlap_$d.txt; cp $WORK/$d/reference.txt $OUT/reference_$d.txt; done
grep -hE "^(all_gather_gemm|gemm_reduce_scatter) /|back to back" $WORK/w2_*/overlap.txt | paste - - | sed 's/ bf16, world 2, gemm_sms/ g/; s/of 132.*back to back/:/; s/ms\/step.*//'
grep -h "rror" $WORK/w2_*/*.txt | tail -n 4
