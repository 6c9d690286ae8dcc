#!/bin/bash
# 4 x H200: the W = 4 grid's cells not yet run on this kind, every algorithm in auto beside every equal-output peer
# (python -m reference --collective all), in the order given; cells stop starting after BUDGET_S seconds.
# Usage: STREAMK_PGAS_COMMIT=<sha> W4_SHAPES="..." BUDGET_S=330 bash results/logs/h200x4/run_call4.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
for s in ${W4_SHAPES:-}; do
  if (( $(date +%s) - T0 > ${BUDGET_S:-330} )); then stamp "budget spent: $s not run"; continue; fi
  NP=4 TAG=w4 ALGORITHMS=all_reduce,one_shot,all_scatter,all_gather_gemm,gemm_reduce_scatter MODES=auto ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=100 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $s
  NP=4 COLLECTIVE=all REF_TAG=reference_w4 REF_TIMEOUT=110 ITERS=20 WARMUP=5 reference $s
done
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
tail -n 50 $WORK/summary.txt
