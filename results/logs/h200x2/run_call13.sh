#!/bin/bash
# One call on a 2-GPU machine: the reduce family's communication alone (tools.comm_bench, W = 2, COMM_SIZES) beside
# its peers; the reduce family validated back to back at 2 ranks (tests/mpi/op_back_to_back.py: 200 steps with
# rotating user tensors and C read between steps, 200 graph replays, small and B2B_SHAPE); the reduce family in
# MODES beside its equal-output peers at SHAPES. Every step has its own timeout; one file back ($OUT/all.tgz).
# Usage: STREAMK_PGAS_COMMIT=<sha> COMM_SIZES=... SHAPES="..." B2B_SHAPE="M N K" bash results/logs/h200x2/run_call13.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
if [ -n "${COMM_SIZES:-}" ]; then
  NP=2 COMM_TIMEOUT=150 comm_bench comm_w2 --sizes "$COMM_SIZES" --programs "${COMM_PROGRAMS:-16,64,128}"
fi
b2b() {  # b2b TAG ARGS...: tests/mpi/op_back_to_back.py on 2 ranks, the reduce family
  local tag=$1; shift
  stamp "b2b $tag $*"
  timeout "${B2B_TIMEOUT:-120}" mpirun --allow-run-as-root -np 2 --bind-to none python3 tests/mpi/op_back_to_back.py \
    --algorithms all_reduce,one_shot "$@" > "$WORK/b2b_$tag.txt" 2>&1
  echo "rc=$? $(grep -c OP_B2B_OK "$WORK/b2b_$tag.txt") ok, $(grep -c OP_B2B_FAIL "$WORK/b2b_$tag.txt") failed" \
    | tee -a "$WORK/b2b_$tag.txt"
}
if [ -n "${B2B_SHAPE:-}" ]; then
  read -r BM BN BK <<< "$B2B_SHAPE"
  b2b rotate --steps 200 --rotate
  b2b graph --steps 200 --graph
  b2b rotate_big --steps 200 --rotate --m "$BM" --n "$BN" --k "$BK"
  b2b poison_big --steps 50 --poison_between --m "$BM" --n "$BN" --k "$BK"
fi
for s in ${SHAPES:-}; do
  NP=2 TAG=w2 ALGORITHMS=all_reduce,one_shot MODES=${MODES:-auto,fused,two_streams,fused_sequential} ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=90 BENCH_ARGS="--timeout_s 5" SHOW=8 overlap $s
  NP=2 COLLECTIVE=one_shot REF_TAG=reference_w2 REF_TIMEOUT=90 ITERS=20 WARMUP=5 reference $s
done
finish > /dev/null
rm -rf "${OUT:?}"/*; tar czf $OUT/all.tgz -C $WORK .
grep -v Warning $WORK/comm_w2.txt 2>/dev/null | tail -n 7
tail -n 40 $WORK/summary.txt | cut -c1-200
