#!/bin/bash
# One call on a 2-GPU machine, A/B of two trees (this checkout; a probe tree at $PROBE_DIR): all_gather_gemm in MODES
# at SHAPE with ITERS iterations (the back-to-back loop long enough to meet the power cap), nvidia-smi sampling SM
# clock and power every 100 ms; then the torch peers at the same count. One file back ($OUT/all.tgz).
# Usage: STREAMK_PGAS_COMMIT=<sha> PROBE_DIR=scratch/x PROBE_COMMIT=... SHAPE=MxNxK MODES=... ITERS=200 \
#        bash results/logs/h200x2/run_call18.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
ROOT=$(pwd)
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 100 \
  > /tmp/smi.csv 2>&1 &
SMI=$!
side() {  # side TAG DIR COMMIT
  (cd "$2" && export WORK=/tmp/work/$1 STREAMK_PGAS_COMMIT=$3 && mkdir -p $WORK && source scripts/gpu_runs.sh \
   && NP=2 TAG=w2 ALGORITHMS=all_gather_gemm MODES=$MODES ITERS=$ITERS WARMUP=5 OVERLAP_TIMEOUT=150 \
      BENCH_ARGS="--timeout_s 5" SHOW=8 overlap $SHAPE; finish > /dev/null)
}
side new "$ROOT" "$STREAMK_PGAS_COMMIT"
side probe "$ROOT/$PROBE_DIR" "$PROBE_COMMIT"
(export WORK=/tmp/work/new && source scripts/gpu_runs.sh && NP=2 COLLECTIVE=all_gather_gemm REF_TAG=reference_w2 \
  REF_TIMEOUT=150 ITERS=$ITERS WARMUP=5 reference $SHAPE; finish > /dev/null)
kill $SMI; cp /tmp/smi.csv /tmp/work/
rm -rf "${OUT:?}"/*; tar czf $OUT/all.tgz -C /tmp/work .
for t in new probe; do echo "== $t"; grep -h "streamk-pgas\|cublas\|torch" /tmp/work/$t/summary.txt | cut -c1-170; done
