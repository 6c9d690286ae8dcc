#!/bin/bash
# 4 x H200 (after run_call14.sh): all_gather_gemm's SM modes at the large W = 4 cells on more GEMM programs. fused and
# two_streams measured 1.45-1.57x copy_engine's step at 8192^3, 16384 x 8192 x 8192 and 4096 x 8192 x 28672 on 84
# GEMM programs (48 pushing A), the planner's split; on 4 x H100 at 8192^3 100 GEMM programs ran 0.602 ms where 84
# ran 0.665. Here fused and two_streams on 84 / 100 / 116 GEMM programs beside copy_engine (the best mode there) in
# one launch per cell: whether a split brings the SM modes within issue 33's 1.5x, and the push rate per program at
# W = 4 that the planner's model should use (overlap.algorithms.all_gather_gemm's Rates; it assumes 6 GB/s).
# Usage: STREAMK_PGAS_COMMIT=<sha> bash results/logs/h200x4/run_call15.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
for s in ${AG_SHAPES:-8192x8192x8192 16384x8192x8192 4096x8192x28672}; do
  NP=4 TAG=ag ALGORITHMS=all_gather_gemm MODES=fused,two_streams GEMM_SMS=84,100,116 ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=150 BENCH_ARGS="--timeout_s 5" SHOW=6 overlap $s > /dev/null
  NP=4 TAG=ag ALGORITHMS=all_gather_gemm MODES=copy_engine ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=60 \
    BENCH_ARGS="--timeout_s 5" SHOW=1 overlap $s > /dev/null
done
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
grep -E "^all_gather_gemm /|back to back" $WORK/overlap.txt | paste - - | sed 's/ bf16, world \([24]\), gemm_sms/ W\1 g/; s/ of 132.*back to back/:/; s/ms\/step.*//'
