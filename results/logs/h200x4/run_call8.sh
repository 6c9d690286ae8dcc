#!/bin/bash
# 4 x H200: all_gather_gemm's copy engine with the own slot always on the main stream (rows and columns, own A and a
# caller's): W = 2 at 8192^3 on the op's own A, on rotating user tensors (the own rows copied before the GEMM) and in
# graph replays; the timed benchmark at W = 2 (8192^3) and W = 4 (16384 x 8192 x 8192); the GPU tests.
# Usage: STREAMK_PGAS_COMMIT=<sha> bash results/logs/h200x4/run_call8.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
for extra in "--steps 100" "--steps 50 --rotate" "--steps 50 --graph"; do
  stamp "op_back_to_back W = 2 8192^3 copy_engine $extra"
  timeout 100 mpirun --allow-run-as-root -np 2 --bind-to none -x CUDA_VISIBLE_DEVICES=0,1 python3 \
    tests/mpi/op_back_to_back.py --algorithms all_gather_gemm --modes copy_engine --m 8192 --n 8192 --k 8192 \
    --heap_mib 1024 $extra 2>&1 | tee -a $WORK/b2b.txt | grep -E "OP_B2B|rror" | tail -n 3
done
CUDA_VISIBLE_DEVICES=0,1 NP=2 TAG=w2 ALGORITHMS=all_gather_gemm MODES=copy_engine ITERS=20 WARMUP=5 \
  OVERLAP_TIMEOUT=80 BENCH_ARGS="--timeout_s 5" SHOW=3 overlap 8192x8192x8192
NP=4 TAG=w4 ALGORITHMS=all_gather_gemm MODES=copy_engine ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=80 \
  BENCH_ARGS="--timeout_s 5" SHOW=3 overlap 16384x8192x8192
TESTS_TIMEOUT=150 gpu_tests tests/test_new_algorithms.py -k "rotating or every_mode_right_after"
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
tail -n 5 $WORK/summary.txt
