#!/usr/bin/env bash
# Issue 13's acceptance runs on 2 GPUs (two H200s), in two batches of under 10 minutes each.
# Source scripts/gpu_runs.sh first (it sets $WORK, $OUT and the step functions), then call one function
# per batch and `finish`:
#
#   export STREAMK_PGAS_COMMIT=<the commit you send>   # the GPU machine's .git may be stale: pass the hash in
#   source scripts/gpu_runs.sh; source scripts/issue13_x2.sh; issue13_pair; finish      # batch 1
#   source scripts/gpu_runs.sh; source scripts/issue13_x2.sh; issue13_scatter; finish   # batch 2
#
# Every run is validated (back to back too) and timed isolated, back to back and from a CUDA graph; each
# shape's references run in the same batch, right after ours. Logs land in $WORK/<tag>/; `finish` packs them.
set -uo pipefail
ISSUE13_SHAPES="${ISSUE13_SHAPES:-4864x4096x8256 8192x8192x8192 4096x8192x28672}"
ISSUE13_SCATTER_SHAPES="${ISSUE13_SCATTER_SHAPES:-8192x8192x28672 4096x57344x8192 16384x8192x8192}"
ISSUE13_BENCH="--timeout_s 5 --validate_iters 100 --graph"

issue13_pair() {  # all_gather_gemm and gemm_reduce_scatter beside torch's fused ops and cuBLAS + NCCL
  local s
  for s in $ISSUE13_SHAPES; do
    TAG=i13_pair SHOW=12 ALGORITHMS=all_gather_gemm,gemm_reduce_scatter MODES=auto,copy_engine,fused_sequential \
      ITERS=30 OVERLAP_TIMEOUT=150 BENCH_ARGS="$ISSUE13_BENCH" overlap "$s"
    REF_TAG=i13_pair_ref REF_ARGS="--collective all_gather_gemm --graph" REF_TIMEOUT=90 reference "$s"
    REF_TAG=i13_pair_ref REF_ARGS="--collective gemm_reduce_scatter --graph" REF_TIMEOUT=90 reference "$s"
  done
}

issue13_scatter() {  # copy_engine all_scatter beside cuBLAS alone on the shard (every SM) and cuBLAS + NCCL
  local s M N K
  for s in $ISSUE13_SCATTER_SHAPES; do
    IFS=x read -r M N K <<< "$s"
    TAG=i13_scatter SHOW=6 ALGORITHMS=all_scatter MODES=auto,copy_engine ITERS=20 OVERLAP_TIMEOUT=150 \
      BENCH_ARGS="$ISSUE13_BENCH" overlap "$s"
    REF_TAG=i13_scatter_ref REF_ARGS="--collective all_gather --graph" REF_TIMEOUT=90 reference "$s"
    GEMM_TIMEOUT=90 gemm_bench --variants tma --shapes "${M}x$((N / 2))x$K" --plus_one 0 --warmup 20 --rep 100
  done
  NP=2 micro_ce
}

micro_ce() {  # the copy engine's own rates on this machine (peer copies, 2-D rows, banded waits, host cost)
  stamp "copy-engine micro-benchmark"
  mpi_args; timeout 120 "${MPI[@]}" python3 -m tools.copy_engine_bench --output_file "$WORK/copy_engine_bench.json" \
    2>&1 | tee -a "$WORK/micro.txt" | tail -n 12
}
