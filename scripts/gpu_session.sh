#!/usr/bin/env bash
# One batched GPU session (2 GPUs): environment, GEMM vs cuBLAS, every algorithm x mode validated and
# timed, the reference baselines, the heap micro-benchmark and the GPU test subset. Everything lands in
# $OUT/session.tgz (logs, JSON records) plus $OUT/summary.txt; the last lines printed are a summary.
#
#   STEPS="env gemm overlap reference micro tests" OUT=/tmp/out bash scripts/gpu_session.sh
#
# Each step has its own time limit so one slow step cannot starve the rest.
set -uo pipefail
OUT="${OUT:-$(pwd)/out}"
WORK="$OUT/work"
mkdir -p "$WORK"
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export STREAMK_PGAS_COMMIT="${STREAMK_PGAS_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
STEPS="${STEPS:-env gemm overlap reference micro tests}"
SHAPES="${SHAPES:-8192x8192x8192}"
MPI=(mpirun --allow-run-as-root -np 2 --bind-to none)
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$WORK/steps.txt"; }

for step in $STEPS; do
  case "$step" in
  env)
    stamp env
    { nvidia-smi; nvidia-smi topo -m; env | grep -E "NCCL|SYMM|NVSHMEM|CUDA_VISIBLE" ;
      python3 -c "import torch, triton, mpi4py; print(torch.__version__, triton.__version__, mpi4py.__version__, torch.cuda.device_count(), torch.cuda.get_device_name(0))";
      python3 -c "import cuda.bindings; print('cuda.bindings', cuda.bindings.__version__)"; which mpirun; } \
      > "$WORK/env.txt" 2>&1
    tail -n 4 "$WORK/env.txt"
    ;;
  gemm)
    stamp "gemm: Stream-K vs cuBLAS on one GPU"
    timeout "${GEMM_TIMEOUT:-150}" python3 -m stream_k.bench --variants "${GEMM_VARIANTS:-ptr,tma}" \
      --output_dir "$WORK/gemm" 2>&1 | tee "$WORK/gemm.txt" | tail -n 20
    ;;
  overlap)
    for shape in $SHAPES; do
      IFS=x read -r M N K <<< "$shape"
      stamp "overlap $shape: every algorithm x mode, validated and timed"
      timeout "${OVERLAP_TIMEOUT:-300}" "${MPI[@]}" python3 benchmark.py -m "$M" -n "$N" -k "$K" \
        --algorithm "${ALGORITHMS:-all_reduce,all_scatter,one_shot}" \
        --mode "${MODES:-bulk_sync,two_streams,fused,fused_sequential}" ${GEMM_SMS:+--gemm_sms "$GEMM_SMS"} \
        --validate --benchmark --iters "${ITERS:-20}" --warmup "${WARMUP:-5}" ${BENCH_ARGS:-} \
        --output_file "$WORK/overlap/${shape}.json" 2>&1 | tee -a "$WORK/overlap.txt" \
        | grep -E "^(all_|one_)|e2e median|overlap bound|FAILED|error|Error" | tail -n 60
    done
    ;;
  reference)
    for shape in $SHAPES; do
      IFS=x read -r M N K <<< "$shape"
      stamp "reference $shape"
      timeout "${REF_TIMEOUT:-120}" "${MPI[@]}" python3 -m reference --collective all -m "$M" -n "$N" -k "$K" \
        --datatype bf16 --iters "${ITERS:-20}" --warmup "${WARMUP:-5}" --validate --output_dir "$WORK/reference" \
        2>&1 | tee -a "$WORK/reference.txt" | tail -n 12
    done
    ;;
  micro)
    stamp "micro-benchmark: remote read/write bandwidth, flag round trip"
    timeout "${MICRO_TIMEOUT:-120}" "${MPI[@]}" python3 -m iris_ops.microbench --output_file "$WORK/microbench.json" \
      2>&1 | tee "$WORK/micro.txt" | tail -n 25
    ;;
  tests)
    stamp "tests on the GPUs"
    timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest -q -x ${TESTS:-tests/test_iris_device_ops.py tests/test_stream_k_kernel.py} \
      -p no:cacheprovider 2>&1 | tee "$WORK/tests.txt" | tail -n 15
    ;;
  *)
    # anything else is a command line to run as it is
    stamp "run: $step"
    ;;
  esac
done
stamp done
tar czf "$OUT/session.tgz" -C "$WORK" . 2>/dev/null
python3 - "$WORK" > "$OUT/summary.txt" <<'EOF'
import json, sys, pathlib
rows = []
for f in sorted(pathlib.Path(sys.argv[1]).rglob("*.json")):
    try:
        r = json.loads(f.read_text())
    except Exception:
        continue
    if not isinstance(r, dict) or "timing" not in r:
        continue
    s, t = r.get("sizes", {}), r["timing"]
    comp = r.get("components") or {}
    v = (r.get("validation") or {}).get("passed")
    rows.append(f"{r.get('algorithm',''):12} {r.get('implementation',''):26} {str(r.get('mode')):17} "
                f"{s.get('m')}x{s.get('n')}x{s.get('k')} g{(r.get('flags') or {}).get('gemm_sms','-')} "
                f"e2e {t.get('e2e_ms') or float('nan'):.4f} ms tflops {t.get('tflops') or 0:.0f} valid {v} "
                f"bound {comp.get('overlap_bound_ms', float('nan')):.4f} {r.get('skipped', '') or ''}")
print("\n".join(rows))
EOF
cat "$OUT/summary.txt"
