#!/bin/bash
# One call on a 4-GPU machine (issue 32): the reduce family's communication alone (tools.comm_bench) at W = 4
# (COMM_W4 sizes) and W = 2 (COMM_W2), then all_reduce and one_shot in auto, fused, two_streams and fused_sequential
# (MODES) beside their equal-output peers (cuBLAS + NCCL all_reduce, torch symm-mem one-shot / two-shot) at W4_SHAPES
# (W = 4) and W2_SHAPES (W = 2), then GPU tests (TESTS: tests/test_op.py -k expression). Every step has its own timeout.
# Usage: STREAMK_PGAS_COMMIT=<sha> W4_SHAPES="..." W2_SHAPES="..." bash results/logs/h100x4/run_call9.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
if [ -n "${COMM_W4:-}" ]; then
  NP=4 COMM_TIMEOUT=150 comm_bench comm_w4 --sizes "$COMM_W4" --programs "${COMM_PROGRAMS:-16,64,128}"
fi
if [ -n "${COMM_W2:-}" ]; then
  NP=2 COMM_TIMEOUT=100 comm_bench comm_w2 --sizes "$COMM_W2" --programs "${COMM_PROGRAMS:-16,64,128}"
fi
cell() {  # cell NP SHAPE: the reduce family in MODES, then its peers
  NP=$1 TAG=w$1 ALGORITHMS=all_reduce,one_shot MODES=${MODES:-auto,fused,two_streams,fused_sequential} ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=150 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $2
  NP=$1 COLLECTIVE=one_shot REF_TAG=reference_w$1 REF_TIMEOUT=100 ITERS=20 WARMUP=5 reference $2
}
for s in ${W4_SHAPES:-}; do cell 4 $s; done
for s in ${W2_SHAPES:-}; do cell 2 $s; done
if [ -n "${TESTS:-}" ]; then
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-200} gpu_tests tests/test_op.py -k "$TESTS"
fi
finish > /dev/null
tail -n 60 $WORK/summary.txt
