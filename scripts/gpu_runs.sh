#!/usr/bin/env bash
# Batched GPU work for one machine (2 GPUs). Source it and call the steps you need; each step
# has its own time limit so one slow step cannot starve the rest. Logs and JSON records collect in
# $WORK; `finish` packs them into $OUT/runs.tgz and prints a one-line-per-run summary.
#
#   source scripts/gpu_runs.sh
#   env_info; gemm_bench; overlap 8192x8192x8192; reference 8192x8192x8192; micro; gpu_tests; finish
#
# overlap takes its lists from the environment: ALGORITHMS, MODES, GEMM_SMS, CTM (comma-separated),
# and extra benchmark.py flags from BENCH_ARGS; TAG names the log folder. reference runs COLLECTIVE (default
# all; an algorithm's name: its family's equal-output peers), takes extra flags from REF_ARGS and its folder
# name from REF_TAG. NP ranks (2). comm_bench runs tools.comm_bench (the reduce family's communication alone
# beside NCCL and torch symm-mem) with its flags.
set -uo pipefail
# NVLink multicast stays off on every multi-GPU machine (NCCL, torch symmetric memory, NVSHMEM): every step here
# runs with these, whatever the calling script sets
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT="${OUT:-$(pwd)/out}"
WORK="${WORK:-/tmp/streamk_pgas_work}"
mkdir -p "$WORK" "$OUT"
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# Pass the commit in (STREAMK_PGAS_COMMIT=$(git rev-parse HEAD) in the command you send): the device's copy
# of the tree may have no .git or a stale one, and the logs record this variable before git's HEAD.
# Put --timeout_s 5 in BENCH_ARGS on device runs: a lost flag then costs seconds, not 30 s per wait.
if [ -z "${STREAMK_PGAS_COMMIT:-}" ]; then
  STREAMK_PGAS_COMMIT="$(git rev-parse --verify -q HEAD 2>/dev/null || cat .commit 2>/dev/null || echo unknown)"
fi
export STREAMK_PGAS_COMMIT
mpi_args() { MPI=(mpirun --allow-run-as-root -np "${NP:-2}" --bind-to none); }  # NP read at each call
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$WORK/steps.txt"; }

env_info() {
  stamp env
  { nvidia-smi; nvidia-smi topo -m; env | grep -E "NCCL|SYMM|NVSHMEM|CUDA_VISIBLE";
    python3 -c "import torch, triton, mpi4py; print(torch.__version__, triton.__version__, mpi4py.__version__, torch.cuda.device_count(), torch.cuda.get_device_name(0))";
    python3 -c "import cuda.bindings; print('cuda.bindings', cuda.bindings.__version__)"; which mpirun; } \
    > "$WORK/env.txt" 2>&1
  tail -n 3 "$WORK/env.txt"
}

gemm_bench() {
  stamp "gemm: Stream-K vs cuBLAS on one GPU $*"
  timeout "${GEMM_TIMEOUT:-150}" python3 -m tools.gemm_bench --output_dir "$WORK/gemm" "$@" 2>&1 \
    | tee -a "$WORK/gemm.txt" | tail -n 16
}

gemm_sweep() {  # gemm_sweep TAG SHAPES [flags]: GEMM candidates per shape beside cuBLAS (tools.gemm_sweep)
  local tag=$1 shapes=$2; shift 2
  stamp "gemm sweep $tag"
  timeout "${SWEEP_TIMEOUT:-280}" python3 -m tools.gemm_sweep --shapes "$shapes" --csv "$WORK/sweep/$tag.csv" "$@" \
    2>&1 | tee -a "$WORK/gemm_sweep.txt" | tail -n "${SHOW:-40}"
}

overlap() {  # overlap SHAPE: every combination of the lists, validated and timed, in one launch
  local shape=$1 M N K
  IFS=x read -r M N K <<< "$shape"
  stamp "overlap ${TAG:-runs} $shape alg=${ALGORITHMS:-all} modes=${MODES:-all} gemm_sms=${GEMM_SMS:-default} ctm=${CTM:-default}"
  mpi_args; timeout "${OVERLAP_TIMEOUT:-300}" "${MPI[@]}" python3 benchmark.py -m "$M" -n "$N" -k "$K" \
    --algorithm "${ALGORITHMS:-all_reduce,all_scatter,one_shot}" \
    --mode "${MODES:-bulk_sync,two_streams,fused,fused_sequential}" ${GEMM_SMS:+--gemm_sms "$GEMM_SMS"} \
    ${CTM:+--COMMUNICATION_TILE_M "$CTM"} ${VALIDATE---validate} --benchmark --iters "${ITERS:-30}" \
    --warmup "${WARMUP:-10}" ${BENCH_ARGS:-} --output_file "$WORK/${TAG:-runs}/${shape}.json" 2>&1 \
    | tee -a "$WORK/overlap.txt" | grep -E "e2e median|FAILED|rror" | tail -n "${SHOW:-20}"
}

reference() {
  local shape=$1 M N K
  IFS=x read -r M N K <<< "$shape"
  stamp "reference $shape"
  mpi_args; timeout "${REF_TIMEOUT:-120}" "${MPI[@]}" python3 -m reference --collective "${COLLECTIVE:-all}" \
    -m "$M" -n "$N" -k "$K" \
    --datatype bf16 --iters "${ITERS:-30}" --warmup "${WARMUP:-10}" --validate ${REF_ARGS:-} \
    --output_dir "$WORK/${REF_TAG:-reference}" \
    2>&1 | tee -a "$WORK/reference.txt" | cut -c1-150 | tail -n 8
}

comm_bench() {  # comm_bench TAG [flags]: tools.comm_bench on NP ranks, CSV / JSON / PNG under $WORK
  local tag=$1; shift
  stamp "comm bench $tag (NP=${NP:-2}) $*"
  mpi_args; timeout "${COMM_TIMEOUT:-300}" "${MPI[@]}" python3 -m tools.comm_bench --csv "$WORK/$tag.csv" \
    --json "$WORK/$tag.json" --png "$WORK/$tag.png" "$@" 2>&1 | tee -a "$WORK/$tag.txt" | tail -n "${SHOW:-12}"
}

micro() {
  stamp "micro-benchmark: remote read/write bandwidth, flag round trip"
  mpi_args; timeout "${MICRO_TIMEOUT:-120}" "${MPI[@]}" python3 -m tools.microbench --output_file "$WORK/microbench.json" \
    "$@" 2>&1 | tee -a "$WORK/micro.txt" | tail -n 12
}

gpu_tests() {  # gpu_tests TEST_PATHS...
  stamp "tests on the GPUs: $*"
  timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider "$@" 2>&1 \
    | tee -a "$WORK/tests.txt" | tail -n 6
}

finish() {
  stamp done
  python3 - "$WORK" > "$WORK/summary.txt" <<'EOF'
import json, sys, pathlib
rows = []
for f in sorted(pathlib.Path(sys.argv[1]).rglob("*.json")):
    try:
        r = json.loads(f.read_text())
    except Exception:
        continue
    if not isinstance(r, dict) or "timing" not in r or r.get("producer") == "microbench":
        continue
    s, t, fl = r.get("sizes", {}), r["timing"], r.get("flags") or {}
    comp = r.get("components") or {}
    val = r.get("validation") or {}
    v = val.get("passed")
    b2b = (val.get("back_to_back") or {}).get("steps", "-")
    nan = float("nan")
    rows.append(f"{r.get('algorithm',''):11} {r.get('implementation','')[:24]:24} {str(r.get('mode')):16} "
                f"{s.get('m')}x{s.get('n')}x{s.get('k')} g{fl.get('gemm_sms','-')} "
                f"e2e {t.get('e2e_ms') or nan:.4f} loop {t.get('loop_ms') or nan:.4f} graph {t.get('graph_ms') or nan:.4f} "
                f"host {t.get('host_us_per_step') or nan:.1f}us fast={t.get('fast_launch')} v={v} b2b={b2b} "
                f"galone {comp.get('gemm_alone_ms', nan):.4f} calone {comp.get('comm_alone_ms', nan):.4f}")
print("\n".join(rows))
EOF
  tar czf "$OUT/runs.tgz" -C "$WORK" .
  cp "$WORK/summary.txt" "$OUT/summary.txt"
  cat "$WORK/summary.txt"
}
