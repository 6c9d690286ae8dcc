#!/bin/bash
# The shapes still below 0.95x (not the misaligned ones): more candidates than the model ranks, for the next fit.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache STREAMK_PGAS_COMMIT=${STREAMK_PGAS_COMMIT:-unknown}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $OUT/env.txt 2>&1
G="256x5120x8192,512x1280x8192,2048x1280x8192,256x28672x8192,256x8192x4096,512x5120x8192,1024x5120x8192"
C="default,128x128x64/s4/w8/auto,128x128x64/s5/w8/auto,128x256x64/s3/w8/auto,64x128x128/s4/w4/auto,64x256x64/s4/w8/auto,256x128x64/s3/w8/auto,128x192x64/s4/w8/dp,128x160x64/s4/w8/dp,128x128x64/s4/w8/splitk2,128x256x64/s3/w8/splitk2"
timeout 400 python3 -m harness.gemm_sweep --graph false --shapes $G --candidates $C --csv $OUT/g.csv > $OUT/g.log 2>&1; echo "G rc=$?"
python3 -m tools.gemm_model_check $OUT/g.csv | tail -9
