#!/usr/bin/env bash
# What one GPU can check of the shape grid (issue 12): the Stream-K GEMM alone on every grid shape's
# 2-rank shard beside cuBLAS (TMA, all SMs), the unaligned shape validated and timed (world 1, and two
# ranks sharing the GPU for the cross-process protocol), and --tune writing and a plain run reading the
# tuning cache. Source scripts/gpu_runs.sh first; results land in $WORK, packed by `finish`.
set -uo pipefail
AR_SHARDS=512x8192x4096,1024x8192x4096,2048x4096x7168,4096x8192x14336,4096x57344x4096,16384x8192x4096,4864x4096x4128,8192x8192x4096,1000x3000x1250
AS_SHARDS=512x4096x8192,1024x4096x8192,2048x2048x14336,4096x4096x28672,4096x28672x8192,16384x4096x8192,4864x2048x8256,8192x4096x8192,1000x1500x2500
grid_gemm() {
  GEMM_TIMEOUT=240 gemm_bench --variants tma --shapes "$AR_SHARDS,$AS_SHARDS" --warmup 20 --rep 100
  GEMM_TIMEOUT=60 gemm_bench --variants tma --shapes 4864x4096x4128,4864x2048x8256 --datatype fp16 --warmup 20 --rep 100
}
grid_unaligned() {
  NP=1 TAG=w1_unaligned MODES=auto,bulk_sync,two_streams,fused,fused_sequential ITERS=20 WARMUP=5 \
    BENCH_ARGS="--timeout_s 5 --validate_iters 100" overlap 1000x3000x2500
  NP=2 STREAMK_PGAS_SHARE_GPU=1 TAG=shared_unaligned MODES=auto,bulk_sync,two_streams,fused,fused_sequential \
    ITERS=3 WARMUP=1 BENCH_ARGS="--timeout_s 20 --validate_iters 30" OVERLAP_TIMEOUT=400 overlap 1000x3000x2500
}
grid_tune() {
  stamp "tune all_reduce 4864x4096x8256 (world 1), then a plain run that reads the cache"
  export STREAMK_PGAS_TUNING_CACHE="$WORK/tuning.json"
  timeout 240 python3 benchmark.py --algorithm all_reduce -m 4864 -n 4096 -k 8256 --tune 4 --iters 20 --warmup 5 \
    --timeout_s 5 --output_file "$WORK/tune/all_reduce_4864.json" 2>&1 | tee -a "$WORK/tune.txt" | grep -E "tune|planned"
  timeout 120 python3 benchmark.py --algorithm all_reduce -m 4864 -n 4096 -k 8256 --validate --benchmark --iters 20 \
    --timeout_s 5 --output_file "$WORK/tune/after.json" 2>&1 | tee -a "$WORK/tune.txt" | grep -E "planned|back to back"
}
