#!/bin/bash
# One call on a 4-GPU machine (issue 33): all_gather_gemm in AG_MODES (default auto, bulk_sync, copy_engine) beside
# its peers (cuBLAS + NCCL, torch's fused_all_gather_matmul) at W4_SHAPES (W = 4) and W2_SHAPES (W = 2).
# Usage: STREAMK_PGAS_COMMIT=<sha> W4_SHAPES="..." W2_SHAPES="..." bash results/logs/h100x4/run_call10.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
cell() {  # cell NP SHAPE
  NP=$1 TAG=w$1 ALGORITHMS=all_gather_gemm MODES=${AG_MODES:-auto,bulk_sync,copy_engine} ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=90 BENCH_ARGS="--timeout_s 5" SHOW=6 overlap $2
  NP=$1 COLLECTIVE=all_gather_gemm REF_TAG=reference_w$1 REF_TIMEOUT=80 ITERS=20 WARMUP=5 reference $2
}
for s in ${W4_SHAPES:-}; do cell 4 $s; done
for s in ${W2_SHAPES:-}; do cell 2 $s; done
finish > /dev/null
tail -n 40 $WORK/summary.txt
