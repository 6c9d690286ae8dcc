#!/bin/bash
# One call on a 2-GPU machine, A/B of two trees in the same call: NEW (this checkout) and BASE (an older tree at
# $BASE_DIR, its commit in BASE_COMMIT). For each: the reduce family's communication alone (tools.comm_bench, W = 2,
# COMM_SIZES), then the reduce family (NEW: ALGS_NEW, BASE: ALGS_BASE) in MODES at SHAPES; the equal-output peers
# once per shape (reference, NEW tree). Every step has its own timeout; logs under $OUT/{new,base}.
# Usage: STREAMK_PGAS_COMMIT=<sha> BASE_DIR=scratch/base BASE_COMMIT=<sha> SHAPES="..." COMM_SIZES=... \
#        bash results/logs/h200x2/run_call12.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
ROOT=$(pwd)
NEW_COMMIT=$STREAMK_PGAS_COMMIT
side() {  # side TAG DIR COMMIT ALGS
  local tag=$1 dir=$2 commit=$3 algs=$4
  (cd "$dir" && export WORK=/tmp/work/$tag STREAMK_PGAS_COMMIT=$commit && mkdir -p $WORK && source scripts/gpu_runs.sh \
   && { [ "$tag" = new ] && env_info || true; } \
   && { [ -z "${COMM_SIZES:-}" ] || NP=2 COMM_TIMEOUT=${COMM_TIMEOUT:-150} comm_bench comm_w2 --sizes "$COMM_SIZES" \
        --programs "${COMM_PROGRAMS:-16,64,128}" ${COMM_ARGS:-}; } \
   && for s in ${SHAPES:-}; do
        NP=2 TAG=w2 ALGORITHMS=$algs MODES=${MODES:-auto,fused,two_streams,fused_sequential} ITERS=20 WARMUP=5 \
          OVERLAP_TIMEOUT=${OVERLAP_TIMEOUT:-90} BENCH_ARGS="--timeout_s 5" SHOW=8 overlap $s
        if [ "$tag" = new ]; then
          NP=2 COLLECTIVE=one_shot REF_TAG=reference_w2 REF_TIMEOUT=90 ITERS=20 WARMUP=5 reference $s
        fi
      done; finish > /dev/null )
}
side new "$ROOT" "$NEW_COMMIT" "${ALGS_NEW:-one_shot,all_reduce}"
side base "$ROOT/$BASE_DIR" "$BASE_COMMIT" "${ALGS_BASE:-one_shot}"
rm -rf "${OUT:?}"/*; tar czf $OUT/all.tgz -C /tmp/work .  # one file back: both trees' logs
for t in new base; do echo "== $t"; grep -h "  ours\|best\|GB/s" /tmp/work/$t/comm_w2.txt | tail -n 30 | cut -c1-160
  tail -n 40 /tmp/work/$t/summary.txt | cut -c1-200; done
