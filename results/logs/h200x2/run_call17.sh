#!/bin/bash
# One call on a 2-GPU machine: is all_gather_gemm's back-to-back loop slower than its isolated step because of the
# loop's length (clocks, power)? SHAPE in MODES with ITERS_LIST iterations each (one benchmark.py launch per count),
# the torch peers at the largest count, nvidia-smi sampling SM clock and power every 100 ms throughout.
# Usage: STREAMK_PGAS_COMMIT=<sha> SHAPE=MxNxK MODES=... ITERS_LIST="20 200" bash results/logs/h200x2/run_call17.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/tcache WORK=/tmp/work
mkdir -p $WORK
source scripts/gpu_runs.sh
env_info
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 100 > $WORK/smi.csv 2>&1 &
SMI=$!
for it in ${ITERS_LIST:-20 200}; do
  NP=2 TAG=it$it ALGORITHMS=all_gather_gemm MODES=${MODES:-copy_engine} ITERS=$it WARMUP=5 OVERLAP_TIMEOUT=150 \
    BENCH_ARGS="--timeout_s 5" SHOW=8 overlap $SHAPE
done
last=$(echo ${ITERS_LIST:-20 200} | awk '{print $NF}')
NP=2 COLLECTIVE=all_gather_gemm REF_TAG=reference_it$last REF_TIMEOUT=150 ITERS=$last WARMUP=5 reference $SHAPE
kill $SMI
finish > /dev/null
rm -rf "${OUT:?}"/*; tar czf $OUT/all.tgz -C $WORK .
tail -n 12 $WORK/summary.txt | cut -c1-200
python3 - $WORK/smi.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5 and r[1].strip() in ("0", "1")]
clk = [int(r[2].split()[0]) for r in rows if r[2].strip().split()[0].isdigit()]
pw = [float(r[4].split()[0]) for r in rows if r[4].strip().split()[0].replace('.', '').isdigit()]
print("samples", len(rows), "sm clock MHz min/median/max", min(clk), sorted(clk)[len(clk) // 2], max(clk),
      "power W max", max(pw))
reasons = {}
for r in rows:
    reasons[r[6].strip()] = reasons.get(r[6].strip(), 0) + 1
print("throttle reasons", reasons)
PY
