#!/bin/bash
# One call on a 4-GPU machine: the reduce family (all_reduce, one_shot) at R4_SHAPES on 4 GPUs and R2_SHAPES on 2, in
# auto, fused, two_streams and fused_sequential, beside every equal-output peer (cuBLAS + NCCL, torch symm-mem one-shot
# and two-shot); gemm_reduce_scatter at SPLIT_SHAPES (W = 4) in auto and fused / two_streams on GEMM_SMS, beside its
# peers. Usage: STREAMK_PGAS_COMMIT=<sha> R4_SHAPES="..." R2_SHAPES="..." SPLIT_SHAPES="..." bash results/logs/h100x4/run_call7.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
reduce_cell() {  # reduce_cell NP SHAPE
  NP=$1 TAG=w$1 ALGORITHMS=all_reduce,one_shot MODES=auto,fused,two_streams,fused_sequential ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=100 BENCH_ARGS="--timeout_s 5" SHOW=8 overlap $2
  NP=$1 COLLECTIVE=one_shot REF_TAG=reference_w$1 REF_TIMEOUT=80 ITERS=20 WARMUP=5 reference $2
}
for s in ${R4_SHAPES:-}; do reduce_cell 4 $s; done
for s in ${R2_SHAPES:-}; do reduce_cell 2 $s; done
for s in ${SPLIT_SHAPES:-}; do
  NP=4 TAG=w4 ALGORITHMS=gemm_reduce_scatter MODES=auto ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=60 BENCH_ARGS="--timeout_s 5" \
    SHOW=2 overlap $s
  NP=4 TAG=w4_split ALGORITHMS=gemm_reduce_scatter MODES=fused,two_streams GEMM_SMS=${GEMM_SMS:-84,100} ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=80 BENCH_ARGS="--timeout_s 5" SHOW=4 overlap $s
  NP=4 COLLECTIVE=gemm_reduce_scatter REF_TAG=reference_w4 REF_TIMEOUT=80 ITERS=20 WARMUP=5 reference $s
done
finish > /dev/null
cut -c1-150 $WORK/summary.txt
