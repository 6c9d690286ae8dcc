#!/bin/bash
# Stages per sm_90 tile on the tp shapes that take it (the model's schedule for each: `auto`, or dp for two-block tiles).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache STREAMK_PGAS_COMMIT=${STREAMK_PGAS_COMMIT:-unknown}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $OUT/env.txt 2>&1
S="timeout 150 python3 -m harness.gemm_sweep --graph false"
$S --shapes 64x5120x8192,64x8192x4096,64x28672x8192,64x8192x14336,64x8192x3584 --candidates default,64x64x128/s4/w4/auto,64x64x128/s5/w4/auto,64x64x128/s6/w4/auto,64x64x128/s7/w4/auto,64x64x128/s8/w4/auto --csv $OUT/a.csv > $OUT/a.log 2>&1; echo "a rc=$?"
$S --shapes 128x8192x3584,256x1280x8192,128x1280x8192 --candidates default,64x128x128/s3/w4/auto,64x128x128/s4/w4/auto,64x128x128/s5/w4/auto,64x128x128/s6/w4/auto,64x64x128/s4/w4/splitk3,64x64x128/s6/w4/splitk3,64x64x128/s8/w4/splitk3 --csv $OUT/b.csv > $OUT/b.log 2>&1; echo "b rc=$?"
$S --shapes 1024x8192x4096,2048x8192x3584,4096x8192x4096,1000x3000x3000,3000x3000x3000 --candidates default,128x256x64/s3/w8/auto,128x256x64/s4/w8/auto,128x192x64/s3/w8/dp,128x192x64/s4/w8/dp,128x192x64/s5/w8/dp --csv $OUT/c.csv > $OUT/c.log 2>&1; echo "c rc=$?"
