#!/bin/bash
# One call on a 4-GPU machine: gemm_reduce_scatter at RS_SHAPES (W = 4) in auto, copy_engine, two_streams and fused
# beside its peers (the planner's copy-engine model recalibrated); the reduce family at 1000 x 3000 x 2500 (W = 4)
# with a traced two_streams step, beside its peers, and the Stream-K GEMM alone on its per-rank shape (84 programs);
# both sequence-parallel algorithms at W2_SHAPES on 2 GPUs in every mode beside their peers.
# Usage: STREAMK_PGAS_COMMIT=<sha> RS_SHAPES="..." W2_SHAPES="..." bash results/logs/h100x4/run_call6.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
for s in ${RS_SHAPES:-}; do
  NP=4 TAG=w4 ALGORITHMS=gemm_reduce_scatter MODES=auto,two_streams,fused,copy_engine ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=100 BENCH_ARGS="--timeout_s 5" SHOW=5 overlap $s
  NP=4 COLLECTIVE=gemm_reduce_scatter REF_TAG=reference_w4 REF_TIMEOUT=80 ITERS=20 WARMUP=5 reference $s
done
if [ "${SMALL:-1}" = 1 ]; then
  s=1000x3000x2500
  NP=4 TAG=w4 ALGORITHMS=all_reduce,one_shot MODES=auto,two_streams,fused_sequential ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=100 BENCH_ARGS="--timeout_s 5" SHOW=6 overlap $s
  NP=4 COLLECTIVE=all_reduce REF_TAG=reference_w4 REF_TIMEOUT=80 ITERS=20 WARMUP=5 reference $s
  stamp "trace all_reduce two_streams $s"; mkdir -p $WORK/trace
  NP=4; mpi_args; timeout 80 "${MPI[@]}" python3 benchmark.py -m 1000 -n 3000 -k 2500 --algorithm all_reduce \
    --mode two_streams --benchmark --iters 10 --warmup 3 --timeout_s 5 --trace_tiles \
    --output_file $WORK/trace/all_reduce_two_streams_$s.json 2>&1 | grep -E "e2e median|overlap bound|rror" | tail -4
  CUDA_VISIBLE_DEVICES=0 GEMM_TIMEOUT=80 gemm_bench --shapes 1000x3000x625,1000x3000x640,1000x750x2500 \
    --num_programs 84 --plus_one 0 --variants tma
fi
for s in ${W2_SHAPES:-}; do
  NP=2 TAG=w2 ALGORITHMS=all_gather_gemm,gemm_reduce_scatter MODES=auto,two_streams,fused,fused_sequential,copy_engine \
    ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=120 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $s
  for c in all_gather_gemm gemm_reduce_scatter; do
    NP=2 COLLECTIVE=$c REF_TAG=reference_w2 REF_TIMEOUT=80 ITERS=20 WARMUP=5 reference $s
  done
done
finish > /dev/null
cut -c1-150 $WORK/summary.txt
