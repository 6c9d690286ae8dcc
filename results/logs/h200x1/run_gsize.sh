#!/bin/bash
# One H200: the Stream-K GEMM alone (benchmark.py at one rank) at the local shapes of the sequence-parallel cells,
# with its tiles walked in groups of GSIZES tile rows (8: the default; fewer: one owner's rows complete before the
# next's, what the copy engine's row-following schedules wait for), validated, back to back.
# Usage: STREAMK_PGAS_COMMIT=<sha> SHAPES="..." GSIZES="8 4 2 1" bash results/logs/h200x1/run_gsize.sh
set -u
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
for s in ${SHAPES:-}; do
  for gs in ${GSIZES:-8 4 2 1}; do
    NP=1 TAG=g$gs ALGORITHMS=all_reduce MODES=fused ITERS=30 WARMUP=10 OVERLAP_TIMEOUT=60 \
      BENCH_ARGS="--gsize_m $gs" SHOW=2 overlap $s > /dev/null
  done
done
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
grep -E "^all_reduce /|back to back|planned" $WORK/overlap.txt | paste - - - | sed 's/planned.*-> //; s/ms\/step.*//' | cut -c1-230
