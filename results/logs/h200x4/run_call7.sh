#!/bin/bash
# 4 x H200: all_gather_gemm's copy_engine stalled at W = 2 (8192^3, 16384 x 8192 x 8192: the GEMM waited for rows of A
# in the timed steps, after validation passed). Phase 1, two GPU pairs at once, W = 2, copy_engine at those shapes in
# four trees: scratch/old (before the own A in slot 0), scratch/new (with it: the stalled build), scratch/noinplace
# (the new tree with own_in_place forced off), and this tree (the own slot's words on the main stream before the
# GEMM). Phase 2, this tree: 200 steps on the op's own A and 200 graph replays at 8192^3 (W = 2), the W = 2 cells
# of both sequence-parallel algorithms beside their peers, the GPU tests, a W = 4 copy_engine check.
# Usage: STREAMK_PGAS_COMMIT=<sha> bash results/logs/h200x4/run_call7.sh   (carry scratch/old, new, noinplace)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
ce() {  # ce TREE GPUS SHAPE: all_gather_gemm copy_engine at W = 2 in TREE on GPUS
  local tree=$1 gpus=$2 s=$3 tag
  tag=ce_$(basename "$tree")
  [ "$tree" = . ] && tag=ce_fix
  (cd "$tree" && CUDA_VISIBLE_DEVICES=$gpus WORK=$WORK/$tag NP=2 TAG=w2 ALGORITHMS=all_gather_gemm MODES=copy_engine \
    ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 BENCH_ARGS="--timeout_s 5" SHOW=3 overlap $s | sed "s|^|$tag $gpus $s: |")
}
stamp "phase 1"
(ce scratch/new 0,1 8192x8192x8192; ce . 0,1 8192x8192x8192; ce . 0,1 16384x8192x8192) &
(ce scratch/noinplace 2,3 8192x8192x8192; ce scratch/old 2,3 8192x8192x8192; ce scratch/new 2,3 16384x8192x8192) &
wait
stamp "phase 2: op_back_to_back W = 2 8192^3"
for extra in "" "--graph"; do
  timeout 150 mpirun --allow-run-as-root -np 2 --bind-to none -x CUDA_VISIBLE_DEVICES=0,1 python3 \
    tests/mpi/op_back_to_back.py --steps 200 --algorithms all_gather_gemm --modes copy_engine,fused,bulk_sync \
    --m 8192 --n 8192 --k 8192 --heap_mib 1024 $extra 2>&1 | tee -a $WORK/b2b.txt | grep -E "OP_B2B|rror" | tail -n 4
done
w2() {  # w2 GPUS NAME SHAPE: both sequence-parallel algorithms in auto beside their peers, W = 2
  export CUDA_VISIBLE_DEVICES=$1 WORK=$WORK/$2
  mkdir -p $WORK
  NP=2 TAG=w2 ALGORITHMS=all_gather_gemm,gemm_reduce_scatter MODES=auto ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=100 \
    BENCH_ARGS="--timeout_s 5" SHOW=4 overlap $3
  NP=2 COLLECTIVE=all REF_TAG=reference_w2 REF_TIMEOUT=120 ITERS=20 WARMUP=5 reference $3 > /dev/null
}
stamp "phase 2: W = 2 cells"
(w2 0,1 w2_gpu01 8192x8192x8192) &
(w2 2,3 w2_gpu23 16384x8192x8192) &
wait
TESTS_TIMEOUT=200 gpu_tests tests/test_new_algorithms.py -k "rotating or every_mode_right_after"
NP=4 TAG=w4 ALGORITHMS=all_gather_gemm MODES=copy_engine ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 \
  BENCH_ARGS="--timeout_s 5" SHOW=3 overlap 8192x8192x8192
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
tail -n 40 $WORK/summary.txt
