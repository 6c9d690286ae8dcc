#!/bin/bash
# 4 x H200 (the next call): issue 33's modes at W = 4, every mode of both sequence-parallel algorithms at W4_SHAPES
# (one launch a shape; `python -m results.mode_table` then sets the planner against them), and at W = 2 on two
# GPU pairs at once the cells that lost there (W2_A on GPUs 0,1, W2_B on 2,3: every mode of both algorithms, then
# their peers), with the own slot on the main stream since 960c311. Shapes stop starting after BUDGET_S seconds.
# With scratch/chunks (carried: `git archive ce-chunks -- overlap stream_k iris_ops harness spec tools streamk_pgas
# reference benchmark.py scripts pyproject.toml setup.py | tar x -C scratch/chunks`), first an A/B of that branch's
# copy-engine chunks against this tree at CHUNK_SHAPES (W = 4, copy_engine, each tree validated).
# Usage: STREAMK_PGAS_COMMIT=<sha> W2_A="4864x4096x8256" W2_B="1024x8192x8192" \
#        W4_SHAPES="2048x4096x14336 4096x8192x28672 8192x8192x8192 512x8192x8192 1024x8192x8192" BUDGET_S=420 \
#        bash results/logs/h200x4/run_call9.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
MODES_ALL=bulk_sync,two_streams,fused,fused_sequential,copy_engine
if [ -d scratch/chunks ]; then
  for s in ${CHUNK_SHAPES:-1000x3000x2500 1024x8192x8192 2048x4096x14336}; do
    NP=4 TAG=w4ce ALGORITHMS=all_gather_gemm MODES=copy_engine,fused ITERS=20 WARMUP=5 OVERLAP_TIMEOUT=90 \
      BENCH_ARGS="--timeout_s 5" SHOW=4 overlap $s
    (cd scratch/chunks && NP=4 TAG=w4ce_chunks ALGORITHMS=all_gather_gemm MODES=copy_engine ITERS=20 WARMUP=5 \
      OVERLAP_TIMEOUT=90 BENCH_ARGS="--timeout_s 5" SHOW=4 overlap $s)
  done
fi
w2() {  # w2 GPUS NAME SHAPES
  export CUDA_VISIBLE_DEVICES=$1 WORK=$WORK/$2
  mkdir -p $WORK
  for s in $3; do
    NP=2 TAG=w2m ALGORITHMS=all_gather_gemm,gemm_reduce_scatter MODES=$MODES_ALL ITERS=20 WARMUP=5 \
      OVERLAP_TIMEOUT=150 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $s > /dev/null
    NP=2 COLLECTIVE=all REF_TAG=reference_w2 REF_TIMEOUT=120 ITERS=20 WARMUP=5 reference $s > /dev/null
  done
}
stamp "W = 2 pairs"
(w2 0,1 w2_gpu01 "${W2_A:-}") &
(w2 2,3 w2_gpu23 "${W2_B:-}") &
wait
for s in ${W4_SHAPES:-}; do
  if (( $(date +%s) - T0 > ${BUDGET_S:-420} )); then stamp "budget spent: $s not run"; continue; fi
  NP=4 TAG=w4m ALGORITHMS=all_gather_gemm,gemm_reduce_scatter MODES=$MODES_ALL ITERS=20 WARMUP=5 \
    OVERLAP_TIMEOUT=150 BENCH_ARGS="--timeout_s 5" SHOW=10 overlap $s
done
finish > /dev/null
python3 -m results.mode_table $WORK --out $WORK/modes > /dev/null 2>&1 && cp $WORK/modes/modes.md $OUT/
cp $WORK/*.txt $OUT/ 2>/dev/null
for d in w2_gpu01 w2_gpu23; do cp $WORK/$d/overlap.txt $OUT/overlap_$d.txt 2>/dev/null; done
grep -h "rror\|budget" $WORK/steps.txt $WORK/overlap.txt $WORK/w2_*/overlap.txt 2>/dev/null | tail -n 6
tail -n 30 $OUT/modes.md 2>/dev/null
