#!/bin/bash
# One call on a 2-GPU machine, A/B of two trees in the same call: this checkout (validated) and a probe tree at
# $PROBE_DIR (timed only: PROBE_VALIDATE=1 validates it too), each running ALGORITHMS in MODES at SHAPES (W = 2);
# then the equal-output peers of COLLECTIVE at SHAPES. One file back ($OUT/all.tgz).
# Usage: STREAMK_PGAS_COMMIT=<sha> PROBE_DIR=scratch/x PROBE_COMMIT=<sha+probe> ALGORITHMS=... MODES=... SHAPES="..." \
#        COLLECTIVE=... bash results/logs/h200x2/run_call14.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
ROOT=$(pwd)
NEW_COMMIT=$STREAMK_PGAS_COMMIT
side() {  # side TAG DIR COMMIT VALIDATE_FLAG
  (cd "$2" && export WORK=/tmp/work/$1 STREAMK_PGAS_COMMIT=$3 && mkdir -p $WORK && source scripts/gpu_runs.sh \
   && for s in ${SHAPES:-}; do
        NP=2 TAG=w2 ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=${OVERLAP_TIMEOUT:-90} BENCH_ARGS="--timeout_s 5" SHOW=8 \
          VALIDATE=$4 overlap $s
      done; finish > /dev/null )
}
side new "$ROOT" "$NEW_COMMIT" --validate
side probe "$ROOT/$PROBE_DIR" "$PROBE_COMMIT" "$([ "${PROBE_VALIDATE:-0}" = 1 ] && echo --validate)"
(export WORK=/tmp/work/new && source scripts/gpu_runs.sh && for s in ${SHAPES:-}; do
   NP=2 REF_TAG=reference_w2 REF_TIMEOUT=90 ITERS=20 WARMUP=5 reference $s; done; finish > /dev/null)
rm -rf "${OUT:?}"/*; tar czf $OUT/all.tgz -C /tmp/work .
for t in new probe; do echo "== $t"; grep -h "kernels\|e2e median" /tmp/work/$t/overlap.txt | cut -c1-180
  tail -n 30 /tmp/work/$t/summary.txt | cut -c1-200; done
