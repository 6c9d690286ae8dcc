#!/bin/bash
# 4 x H200: all_gather_gemm's copy engine with the slot-size rule (rows for small slots, columns for large) back to
# back at W = 4 (200 steps rotating user tensors, C poisoned between steps at a rows cell, graph replays), the GPU
# tests of both sequence-parallel algorithms in every mode, then auto beside every mode at W = 4 cells (the planner's
# picks after its copy-engine model changed).
# Usage: STREAMK_PGAS_COMMIT=<sha> SHAPES="..." bash results/logs/h200x4/run_call11.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
b2b() {  # b2b ARGS...: W = 4, all_gather_gemm copy_engine
  stamp "op_back_to_back W = 4 $*"
  timeout 120 mpirun --allow-run-as-root -np 4 --bind-to none python3 tests/mpi/op_back_to_back.py \
    --algorithms all_gather_gemm --modes copy_engine "$@" 2>&1 | tee -a $WORK/b2b.txt | grep -E "OP_B2B|rror" | tail -n 2
}
b2b --steps 200 --rotate --m 512 --n 1024 --k 8192 --heap_mib 64
b2b --steps 200 --poison_between --m 1024 --n 8192 --k 8192 --heap_mib 512
b2b --steps 200 --graph --m 1024 --n 8192 --k 8192 --heap_mib 512
b2b --steps 100 --rotate --m 4864 --n 4096 --k 8256 --heap_mib 2048
TESTS_TIMEOUT=200 gpu_tests tests/test_new_algorithms.py -k "rotating or every_mode_right_after"
for s in ${SHAPES:-}; do
  NP=4 TAG=w4 ALGORITHMS=all_gather_gemm,gemm_reduce_scatter MODES=auto,bulk_sync,two_streams,fused,fused_sequential,copy_engine \
    ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=120 BENCH_ARGS="--timeout_s 5" SHOW=2 overlap $s > /dev/null
done
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
grep -h "OP_B2B\|rror" $WORK/b2b.txt | tail -n 8
tail -n 4 $WORK/tests.txt 2>/dev/null
grep -E "^(all_gather_gemm|gemm_reduce_scatter) /|back to back" $WORK/overlap.txt | paste - - | sed 's/ bf16, world 4, gemm_sms/ g/; s/of 132.*back to back/:/; s/ms\/step.*//'
