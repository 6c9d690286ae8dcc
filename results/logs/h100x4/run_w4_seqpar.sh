#!/bin/bash
# One call on a 4-GPU machine (issue 33): all_gather_gemm and gemm_reduce_scatter validated and timed in every mode
# and auto at SHAPES, beside their equal-output peers (cuBLAS + NCCL, torch symm-mem's fused ops), NP_GRID ranks.
# Usage on the device: STREAMK_PGAS_COMMIT=<sha> SHAPES="8192x8192x8192 ..." bash results/logs/h100x4/run_w4_seqpar.sh
# (ALGS: the algorithms, both by default; MODES; TESTS="expr": tests/test_new_algorithms.py -k expr on the GPUs last;
# PROBE=1: scripts/probe_stall.sh first, with TIMEOUT_S=5).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
if [ "${PROBE:-0}" = 1 ]; then
  stamp "stall probe"
  OUT=$OUT NP=4 TIMEOUT_S=5 timeout ${PROBE_TIMEOUT:-200} bash scripts/probe_stall.sh > $WORK/probe_stall.txt 2>&1
  tail -n 12 $WORK/probe_stall.txt
fi
ALGS=${ALGS:-all_gather_gemm,gemm_reduce_scatter}
for s in ${SHAPES:-8192x8192x8192}; do
  NP=${NP_GRID:-4} TAG=w${NP_GRID:-4} ALGORITHMS=$ALGS \
    MODES=${MODES:-auto,bulk_sync,two_streams,fused,fused_sequential,copy_engine} ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=${OVERLAP_TIMEOUT:-200} BENCH_ARGS="--timeout_s 5" SHOW=14 overlap $s
  for c in ${ALGS//,/ }; do
    NP=${NP_GRID:-4} COLLECTIVE=$c REF_TAG=reference_w${NP_GRID:-4} REF_TIMEOUT=100 ITERS=20 WARMUP=5 reference $s
  done
done
if [ -n "${TRACE:-}" ]; then  # TRACE="algorithm mode MxNxK": one traced run (per-tile timeline) of that cell at W=4
  read -r talg tmode tshape <<< "$TRACE"; IFS=x read -r tM tN tK <<< "$tshape"
  stamp "trace $TRACE"; mkdir -p $WORK/trace
  mpi_args; NP=4; mpi_args; timeout 120 "${MPI[@]}" python3 benchmark.py -m $tM -n $tN -k $tK --algorithm $talg \
    --mode $tmode --benchmark --iters 10 --warmup 3 --timeout_s 5 --trace_tiles \
    --output_file $WORK/trace/${talg}_${tmode}_${tshape}.json 2>&1 | grep -E "e2e median|rror" | tail -3
fi
if [ -n "${TESTS:-}" ]; then  # GPU tests at the end (TESTS: pytest's -k expression)
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-240} gpu_tests tests/test_new_algorithms.py -k "$TESTS"
fi
finish > /dev/null
tail -n 60 $WORK/summary.txt
