source scripts/gpu_session.sh; source scripts/single_gpu_grid.sh
stamp "small shards with a 128x128 tile, 4 stages"
GEMM_TIMEOUT=120 gemm_bench --variants tma --shapes 512x8192x4096,1024x8192x4096,2048x4096x7168,512x4096x8192,1024x4096x8192,4096x4096x28672,8192x4096x8192 --blk_n 128 --num_stages 4 --warmup 20 --rep 100
grid_unaligned
finish 2>&1 | grep -v "^gemm" | tail -30
