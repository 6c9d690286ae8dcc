#!/bin/bash
# One call on a 4-GPU machine: ALGORITHM (all_gather_gemm by default) at SHAPES (W = 4) in every mode and auto
# beside its peers, then the modes in AB_MODES of the tree in .base (an earlier commit, BASE_COMMIT, carried as plain
# files) at the same shapes (PULL=1: copy_engine with STREAMK_PGAS_CE_PULL=1 too, tag w4_pull), then GPU tests (TESTS:
# a -k expression over tests/test_new_algorithms.py).
# Usage: STREAMK_PGAS_COMMIT=<sha> BASE_COMMIT=<sha> SHAPES="..." [ALGORITHM=...] bash results/logs/h100x4/run_ab.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
ROOT=$(pwd)
ALG=${ALGORITHM:-all_gather_gemm}
for s in $SHAPES; do
  NP=4 TAG=w4 ALGORITHMS=$ALG MODES=auto,bulk_sync,two_streams,fused,fused_sequential,copy_engine \
    ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=120 BENCH_ARGS="--timeout_s 5" SHOW=8 overlap $s
  NP=4 COLLECTIVE=$ALG REF_TAG=reference_w4 REF_TIMEOUT=90 ITERS=20 WARMUP=5 reference $s
  if [ "${PULL:-0}" = 1 ]; then  # all_gather_gemm's copy_engine with pulled rows (STREAMK_PGAS_CE_PULL=1)
    STREAMK_PGAS_CE_PULL=1 NP=4 TAG=w4_pull ALGORITHMS=$ALG MODES=copy_engine ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 \
      BENCH_ARGS="--timeout_s 5" SHOW=2 overlap $s
  fi
  if [ -d .base ]; then
    (cd .base && NP=4 TAG=base_w4 WORK=$WORK OUT=$OUT STREAMK_PGAS_COMMIT=${BASE_COMMIT:-base} PYTHONPATH=$ROOT/.base \
      ALGORITHMS=$ALG MODES=${AB_MODES:-fused,two_streams,copy_engine} ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 \
      BENCH_ARGS="--timeout_s 5" SHOW=4 bash -c 'source scripts/gpu_runs.sh; overlap '$s)
  fi
done
if [ -n "${TESTS:-}" ]; then
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-150} gpu_tests tests/test_new_algorithms.py -k "$TESTS"
fi
finish > /dev/null
tail -n 40 $WORK/summary.txt
