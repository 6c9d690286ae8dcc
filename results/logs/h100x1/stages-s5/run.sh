#!/bin/bash
# 128x128x64 with 5 stages (this tree) beside 4 (4842700 in .base): the tp suite and the op at world 1 on 256x8192x8192.
set -u
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache STREAMK_PGAS_COMMIT=${STREAMK_PGAS_COMMIT:-unknown}
W=$OUT/w; mkdir -p $W; R=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $W/env.txt 2>&1
export PYTHONPATH=$R
sweep() { timeout 95 python3 -m harness.gemm_sweep --suite tp --candidates default "$@" 2>&1 | grep -v Warn; }
sweep --csv $W/tp_bf16.csv > $W/tp_bf16.log; echo "tp rc=$?"
(cd .base && PYTHONPATH=$R/.base STREAMK_PGAS_COMMIT=4842700 timeout 95 python3 -m harness.gemm_sweep --suite tp --candidates default --csv $W/base_bf16.csv 2>&1 | grep -v Warn > $W/base_bf16.log); echo "base rc=$?"
sweep --csv $W/tp_bf16_b.csv > $W/tp_bf16_b.log; echo "tp2 rc=$?"
timeout 200 python3 -m tools.op_overhead --shapes 256x8192x8192 --output $W/op_256.json > $W/op_256.txt 2>&1; echo "op rc=$?"; tail -4 $W/op_256.txt
timeout 100 python3 -m pytest -q tests/test_stream_k_kernel.py tests/test_stream_k_select.py > $W/gpu_tests.txt 2>&1; echo "tests rc=$?"; tail -1 $W/gpu_tests.txt
cd $OUT && tar czf w.tgz w && rm -rf w
