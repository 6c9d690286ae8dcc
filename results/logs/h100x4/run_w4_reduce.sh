#!/bin/bash
# One call on a 4-GPU machine (issue 32): the reduce family's communication alone (tools.comm_bench, W=4, then a
# few sizes at W=2), then all_reduce and one_shot validated and timed at W=4 in each streaming mode and auto,
# beside their equal-output peers (cuBLAS + NCCL all_reduce, torch symm-mem one-shot / two-shot) at SHAPES.
# Usage on the device: STREAMK_PGAS_COMMIT=<sha> SHAPES="8192x8192x8192 ..." bash results/logs/h100x4/run_w4_reduce.sh
# (COMM=0: no comm bench; NP_GRID=2: the cells at W=2; TESTS="expr": tests/test_op.py -k expr on the GPUs last).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
python3 -c "import triton.language as tl, inspect; print('tl.range', inspect.signature(tl.range.__init__))" | tee -a $WORK/env.txt
if [ "${COMM:-1}" = 1 ]; then
  NP=4 COMM_TIMEOUT=${COMM_W4_TIMEOUT:-240} comm_bench comm_w4 ${COMM_ARGS:-}
  NP=2 COMM_TIMEOUT=100 comm_bench comm_w2 --sizes 1MiB,16MiB,256MiB --programs 32,64
  cp $WORK/comm_w4.png $WORK/comm_w4.csv $OUT/ 2>/dev/null
fi
for s in ${SHAPES:-8192x8192x8192}; do
  NP=${NP_GRID:-4} TAG=w${NP_GRID:-4} ALGORITHMS=all_reduce,one_shot MODES=${MODES:-auto,fused,two_streams,fused_sequential} ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=${OVERLAP_TIMEOUT:-200} BENCH_ARGS="--timeout_s 5" SHOW=12 overlap $s
  NP=${NP_GRID:-4} COLLECTIVE=one_shot REF_TAG=reference_w${NP_GRID:-4} REF_TIMEOUT=100 ITERS=20 WARMUP=5 reference $s
done
if [ -n "${TESTS:-}" ]; then  # GPU tests at the end (TESTS: pytest's -k expression)
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} gpu_tests tests/test_op.py -k "$TESTS"
fi
finish > /dev/null
tail -n 40 $WORK/summary.txt
