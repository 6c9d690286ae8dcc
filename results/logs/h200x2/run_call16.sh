#!/bin/bash
# One call on a 2-GPU machine: GPU tests at 2 ranks (TESTS: a tests/test_op.py -k expression), all_gather_gemm and
# gemm_reduce_scatter back to back at 2 ranks (tests/mpi/op_back_to_back.py: 200 steps of rotating user tensors,
# 200 graph replays), then SEQ_ALGS in SEQ_MODES beside their peers at SHAPES (W = 2). One file back.
# Usage: STREAMK_PGAS_COMMIT=<sha> TESTS=... SHAPES="..." bash results/logs/h200x2/run_call16.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
[ -z "${TESTS:-}" ] || TESTS_TIMEOUT=200 gpu_tests tests/test_op.py -k "$TESTS"
for extra in --rotate --graph; do
  stamp "b2b $extra"
  timeout 150 mpirun --allow-run-as-root -np 2 --bind-to none python3 tests/mpi/op_back_to_back.py --steps 200 \
    --algorithms all_gather_gemm,gemm_reduce_scatter $extra > "$WORK/b2b_seq$extra.txt" 2>&1
  echo "rc=$? $(grep -c OP_B2B_OK "$WORK/b2b_seq$extra.txt") ok, $(grep -c OP_B2B_FAIL "$WORK/b2b_seq$extra.txt") failed"
done
for s in ${SHAPES:-}; do
  NP=2 TAG=w2 ALGORITHMS=${SEQ_ALGS:-all_gather_gemm} MODES=${SEQ_MODES:-auto,bulk_sync,copy_engine,two_streams} \
    ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=120 BENCH_ARGS="--timeout_s 5" SHOW=8 overlap $s
  NP=2 COLLECTIVE=${SEQ_ALGS:-all_gather_gemm} REF_TAG=reference_w2 REF_TIMEOUT=90 ITERS=20 WARMUP=5 reference $s
done
finish > /dev/null
rm -rf "${OUT:?}"/*; tar czf $OUT/all.tgz -C $WORK .
tail -n 30 $WORK/summary.txt | cut -c1-200
