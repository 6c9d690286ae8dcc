#!/bin/bash
# One call on a 2-GPU machine: GEMM candidates beside cuBLAS on the op's small-M local shapes (two sweeps at once,
# one per GPU: SWEEP_A on GPU 0 with CAND_A, SWEEP_B on GPU 1 with CAND_B), then the reduce family at W = 2 in
# MODES beside its equal-output peers at W2_SHAPES, then (SEQ_SHAPES) all_gather_gemm and gemm_reduce_scatter
# beside theirs. Every step has its own timeout.
# Usage: STREAMK_PGAS_COMMIT=<sha> SWEEP_A=... CAND_A=... SWEEP_B=... CAND_B=... W2_SHAPES="..." \
#        bash results/logs/h200x2/run_call11.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK/sweep
source scripts/gpu_runs.sh
env_info
if [ -n "${SWEEP_A:-}" ]; then
  CUDA_VISIBLE_DEVICES=0 SHOW=60 gemm_sweep gpu0 "$SWEEP_A" --candidates "$CAND_A" > $WORK/sweep_a.txt 2>&1 &
  CUDA_VISIBLE_DEVICES=1 SHOW=60 gemm_sweep gpu1 "$SWEEP_B" --candidates "$CAND_B" > $WORK/sweep_b.txt 2>&1 &
  wait
  cat $WORK/sweep_a.txt $WORK/sweep_b.txt | grep -v "^\[" | cut -c1-200
fi
cell() {  # cell NP SHAPE: the reduce family in MODES, then its peers
  NP=$1 TAG=w$1 ALGORITHMS=all_reduce,one_shot MODES=${MODES:-auto,fused,two_streams,fused_sequential} ITERS=20 \
    WARMUP=5 OVERLAP_TIMEOUT=120 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $2
  NP=$1 COLLECTIVE=one_shot REF_TAG=reference_w$1 REF_TIMEOUT=90 ITERS=20 WARMUP=5 reference $2
}
seqcell() {  # seqcell NP SHAPE: all_gather_gemm and gemm_reduce_scatter in SEQ_MODES, then their peers
  NP=$1 TAG=seq_w$1 ALGORITHMS=all_gather_gemm,gemm_reduce_scatter MODES=${SEQ_MODES:-auto,bulk_sync,copy_engine} \
    ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=120 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $2
  NP=$1 COLLECTIVE=all_gather_gemm REF_TAG=reference_ag_w$1 REF_TIMEOUT=90 ITERS=20 WARMUP=5 reference $2
  NP=$1 COLLECTIVE=gemm_reduce_scatter REF_TAG=reference_rs_w$1 REF_TIMEOUT=90 ITERS=20 WARMUP=5 reference $2
}
for s in ${W2_SHAPES:-}; do cell 2 $s; done
for s in ${SEQ_SHAPES:-}; do seqcell 2 $s; done
finish > /dev/null
tail -n 80 $WORK/summary.txt
