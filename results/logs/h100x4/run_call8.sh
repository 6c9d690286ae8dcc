#!/bin/bash
# One call on a 4-GPU machine: gemm_reduce_scatter at RS_SHAPES (W = 4) and RS2_SHAPES (W = 2) in auto, two_streams
# and copy_engine beside its peers and beside the copy engine of the tree in .base (BASE_COMMIT, plain files); all_scatter's
# copy engine at AS_SHAPES, new and base; all_gather_gemm's copy engine at AG_SHAPES beside the same with the flags of
# AG_VARIANTS (';'-separated tag=flags, default "n128=--BLK_N 128", empty: none), with the variables of AG_ENV set (tag w4_env), the .base tree's copy engine with the variables of
# AG_BASE_ENV set (e.g. a branch's experiment switch), its peers with AG_REFS=1; the reduce family's communication alone
# at W = 4 (tools.comm_bench, COMM_SIZES, COMM_PROGRAMS); a traced step at TRACE_SHAPE; the GEMM alone at GEMM_SHAPES (one GPU); then GPU tests (TESTS: a -k
# expression over TEST_FILES, default tests/test_new_algorithms.py). Every step has its own timeout.
# (Its OWN_ROWS=1 option ran the own-rows sum, STREAMK_PGAS_CE_OWN_ROWS=1, removed since: logs ownrows-*, own-2be45a5.)
# Usage: STREAMK_PGAS_COMMIT=<sha> BASE_COMMIT=<sha> RS_SHAPES="..." ... bash results/logs/h100x4/run_call8.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
ROOT=$(pwd)
base() {  # base ALG MODES SHAPE [NP]: the .base tree's run
  [ -d .base ] || return 0
  (cd .base && NP=${4:-4} TAG=base_w${4:-4} WORK=$WORK OUT=$OUT STREAMK_PGAS_COMMIT=${BASE_COMMIT:-base} \
    PYTHONPATH=$ROOT/.base ALGORITHMS=$1 MODES=$2 ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=80 BENCH_ARGS="--timeout_s 5" \
    SHOW=4 bash -c 'source scripts/gpu_runs.sh; overlap '$3)
}
rs_cell() {  # rs_cell NP SHAPE: gemm_reduce_scatter in auto, two_streams, copy_engine, its peers, the base copy engine
  NP=$1 TAG=w$1 ALGORITHMS=gemm_reduce_scatter MODES=auto,two_streams,copy_engine ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=90 BENCH_ARGS="--timeout_s 5" SHOW=4 overlap $2
  NP=$1 COLLECTIVE=gemm_reduce_scatter REF_TAG=reference_w$1 REF_TIMEOUT=80 ITERS=20 WARMUP=5 reference $2
  base gemm_reduce_scatter copy_engine $2 $1
}
for s in ${RS_SHAPES:-}; do rs_cell 4 $s; done
for s in ${RS2_SHAPES:-}; do rs_cell 2 $s; done
for s in ${AS_SHAPES:-}; do
  NP=4 TAG=w4 ALGORITHMS=all_scatter MODES=copy_engine ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=60 \
    BENCH_ARGS="--timeout_s 5" SHOW=2 overlap $s
  base all_scatter copy_engine $s
done
for s in ${AG_SHAPES:-}; do
  NP=4 TAG=w4 ALGORITHMS=all_gather_gemm MODES=copy_engine ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=60 \
    BENCH_ARGS="--timeout_s 5" SHOW=2 overlap $s
  IFS=";" read -ra variants <<< "${AG_VARIANTS-n128=--BLK_N 128}"
  for v in "${variants[@]}"; do  # tag=flags: the copy engine with those flags beside the planner's
    NP=4 TAG=w4_${v%%=*} ALGORITHMS=all_gather_gemm MODES=copy_engine ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=60 \
      BENCH_ARGS="--timeout_s 5 ${v#*=}" SHOW=2 overlap $s
  done
  if [ -n "${AG_ENV:-}" ]; then  # this tree's copy engine with these variables set (tag w4_env)
    (export $AG_ENV; NP=4 TAG=w4_env ALGORITHMS=all_gather_gemm MODES=copy_engine ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=60 \
      BENCH_ARGS="--timeout_s 5" SHOW=2 overlap $s)
  fi
  if [ -n "${AG_BASE_ENV:-}" ] && [ -d .base ]; then  # the .base tree's copy engine with these variables set
    (export $AG_BASE_ENV; base all_gather_gemm copy_engine $s)
  fi
  if [ "${AG_REFS:-0}" = 1 ]; then
    NP=4 COLLECTIVE=all_gather_gemm REF_TAG=reference_w4 REF_TIMEOUT=80 ITERS=20 WARMUP=5 reference $s
  fi
done
if [ -n "${COMM_SIZES:-}" ]; then  # the reduce family's communication alone at W = 4, back to back and from graphs
  NP=4 COMM_TIMEOUT=200 comm_bench comm_w4 --sizes "$COMM_SIZES" --programs "${COMM_PROGRAMS:-8,32,64}"
fi
if [ -n "${TRACE_SHAPE:-}" ]; then
  IFS=x read -r tM tN tK <<< "$TRACE_SHAPE"; mkdir -p $WORK/trace
  for tmode in ${TRACE_MODES:-copy_engine}; do
    stamp "trace ${TRACE_ALG:-all_gather_gemm} $tmode $TRACE_SHAPE"
    NP=4; mpi_args; timeout 100 "${MPI[@]}" python3 benchmark.py -m $tM -n $tN -k $tK \
      --algorithm ${TRACE_ALG:-all_gather_gemm} --mode $tmode --benchmark --iters 10 --warmup 3 --timeout_s 5 \
      --trace_tiles --output_file $WORK/trace/${TRACE_ALG:-all_gather_gemm}_${tmode}_${TRACE_SHAPE}.json 2>&1 \
      | grep -E "e2e median|rror" | tail -3
  done
fi
if [ -n "${GEMM_SHAPES:-}" ]; then
  gemm_bench --shapes "$GEMM_SHAPES" --plus_one 0
fi
if [ -n "${TESTS:-}" ]; then
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-200} gpu_tests ${TEST_FILES:-tests/test_new_algorithms.py} -k "$TESTS"
fi
finish > /dev/null
tail -n 40 $WORK/summary.txt
