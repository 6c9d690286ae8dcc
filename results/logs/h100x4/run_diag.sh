#!/bin/bash
# One call on a 4-GPU machine: the op API's timeout check at W = 2 (test_op_api_on_two_ranks failed on GPUs),
# issue 34's stall probe for the barrier and reference phases (barrier twice: cold, then warm Triton cache),
# gemm_reduce_scatter at 4864 x 4096 x 8256 (W = 4) beside its peers, and traced all_gather_gemm steps (fused,
# copy_engine) at TRACE_SHAPE, then GPU tests (TESTS: a -k expression over TEST_FILES). Usage: STREAMK_PGAS_COMMIT=<sha> bash results/logs/h100x4/run_diag.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
if [ "${OPAPI:-1}" = 1 ]; then
  stamp "op_api timeout check, W=2"
  NP=2; mpi_args; IRIS_OPS_TIMEOUT_S=15 timeout 120 "${MPI[@]}" python3 tests/mpi/op_api.py --only ${OPAPI_CHECKS:-timeout} \
    > $WORK/op_api.txt 2>&1; echo "op_api rc=$?" | tee -a $WORK/op_api.txt; grep -E "OP_API|rror" $WORK/op_api.txt | cut -c1-400 | head -8
fi
if [ -n "${SEQ_SHAPES:-}" ]; then
  for s in $SEQ_SHAPES; do
    NP=4 TAG=w4 ALGORITHMS=${ALGS:-gemm_reduce_scatter} MODES=auto,bulk_sync,two_streams,fused,fused_sequential,copy_engine \
      ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=150 BENCH_ARGS="--timeout_s 5" SHOW=8 overlap $s
    for c in ${ALGS:-gemm_reduce_scatter}; do
      NP=4 COLLECTIVE=$c REF_TAG=reference_w4 REF_TIMEOUT=100 ITERS=20 WARMUP=5 reference $s
    done
  done
fi
for tmode in ${TRACE_MODES:-}; do
  tshape=${TRACE_SHAPE:-4096x8192x28672}; IFS=x read -r tM tN tK <<< "$tshape"
  stamp "trace all_gather_gemm $tmode $tshape"; mkdir -p $WORK/trace
  NP=4; mpi_args; timeout 100 "${MPI[@]}" python3 benchmark.py -m $tM -n $tN -k $tK --algorithm all_gather_gemm \
    --mode $tmode --benchmark --iters 10 --warmup 3 --timeout_s 5 --trace_tiles \
    --output_file $WORK/trace/all_gather_gemm_${tmode}_${tshape}.json 2>&1 | grep -E "e2e median|rror" | tail -3
done
if [ -n "${PROBE_PHASES:-}" ]; then
  stamp "stall probe: $PROBE_PHASES"
  OUT=$WORK NP=4 TIMEOUT_S=5 PHASES="$PROBE_PHASES" timeout ${PROBE_TIMEOUT:-200} bash scripts/probe_stall.sh \
    > $WORK/probe_stall_run.txt 2>&1
  cat $WORK/probe_stall/summary.txt
fi
if [ -n "${TESTS:-}" ]; then  # GPU tests (TESTS: pytest's -k expression over TEST_FILES)
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} gpu_tests ${TEST_FILES:-tests/test_new_algorithms.py} -k "$TESTS"
fi
finish > /dev/null
tail -n 20 $WORK/summary.txt
