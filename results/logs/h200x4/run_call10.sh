#!/bin/bash
# 4 x H200: all_gather_gemm's copy engine after the chunk rule (a slot of A's rows in fewer copies where each would
# carry under 4 MiB): back to back at W = 4 and 2 on small slots (200 steps with C poisoned, rotating user tensors,
# graph replays), then at the W = 4 cells where its slots are small, the row chunks (STREAMK_PGAS_CE_A_COLUMNS=0)
# against the column chunks (the default at W >= 4), bulk_sync and fused_sequential beside them in the same launch.
# Usage: STREAMK_PGAS_COMMIT=<sha> AB_SHAPES="..." bash results/logs/h200x4/run_call10.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
b2b() {  # b2b NP GPUS ARGS...
  local np=$1 gpus=$2; shift 2
  stamp "op_back_to_back W = $np $*"
  timeout 100 mpirun --allow-run-as-root -np $np --bind-to none -x CUDA_VISIBLE_DEVICES=$gpus python3 \
    tests/mpi/op_back_to_back.py --algorithms all_gather_gemm --modes copy_engine "$@" 2>&1 \
    | tee -a $WORK/b2b.txt | grep -E "OP_B2B|rror" | tail -n 3
}
b2b 4 0,1,2,3 --steps 200 --poison_between --m 512 --n 1024 --k 2500
b2b 4 0,1,2,3 --steps 200 --rotate --m 512 --n 1024 --k 8192
b2b 4 0,1,2,3 --steps 200 --graph --m 512 --n 1024 --k 2500
b2b 2 0,1 --steps 200 --poison_between --m 256 --n 512 --k 2072
for s in ${AB_SHAPES:-}; do
  NP=4 TAG=cols ALGORITHMS=all_gather_gemm MODES=copy_engine,bulk_sync,fused_sequential ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=90 BENCH_ARGS="--timeout_s 5" SHOW=3 overlap $s
  STREAMK_PGAS_CE_A_COLUMNS=0 NP=4 TAG=rows ALGORITHMS=all_gather_gemm MODES=copy_engine ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=90 BENCH_ARGS="--timeout_s 5" SHOW=3 overlap $s
done
finish > /dev/null
cp $WORK/*.txt $OUT/ 2>/dev/null
grep -h "OP_B2B\|rror" $WORK/b2b.txt | tail -n 8
grep -E "^all_gather_gemm / copy|back to back" $WORK/overlap.txt | paste - - | sed 's/, world.*backend cuda//' | cut -c1-220
