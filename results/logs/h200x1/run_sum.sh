#!/bin/bash
# One H200: gemm_reduce_scatter copy_engine's add after the copies (sum_slots_kernel) alone, by program block and
# warps, at the op's sizes (results/logs/h200x1/sum_slots_bench.py), beside a torch copy of the same bytes.
# Usage: STREAMK_PGAS_COMMIT=<sha> bash results/logs/h200x1/run_sum.sh
set -u
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > $OUT/env.txt
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> $OUT/env.txt
echo "commit ${STREAMK_PGAS_COMMIT:-unknown}" >> $OUT/env.txt
timeout 400 python3 results/logs/h200x1/sum_slots_bench.py --out $OUT/sum_slots.csv 2>&1 | tee $OUT/sum_slots.txt
