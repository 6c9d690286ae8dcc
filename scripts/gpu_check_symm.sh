#!/usr/bin/env bash
# Checks the torch symmetric-memory heap backend (IRIS_OPS_BACKEND=symm) on a machine with 1 or 2 NVIDIA GPUs
# (torch with symmetric memory, e.g. 2.11; triton, e.g. 3.6; mpirun; mpi4py). Run from anywhere:
#
#     bash scripts/gpu_check_symm.sh            # results under $OUT if set, else out/gpu_check_symm
#
# Steps (each under `timeout`; a failing step does not stop the others; exit code 1 if any step failed):
#   env            versions, GPUs, whether torch has the symm_mem ops
#   cpu_error      a one-line error for symm when the GPU is hidden (CUDA_VISIBLE_DEVICES="")
#   heap_api_np1   tests/mpi/heap_api.py on the symm backend, one rank
#   device_np1     tests/mpi/device_ops.py (the whole device-API matrix) on symm, one rank
#   host_api_np1   tests/mpi/iris_host_api.py (Iris's host API) is 2-rank only: runs in the np2 block
#   mixed_np1      tests/mpi/symm_mixed.py: torch symm_mem ops and iris_ops kernels on the same heap tensors
#   np2 block      heap_api, device_ops, iris_host_api, symm_mixed on 2 ranks: one GPU each when there are 2;
#                  on 1 GPU, two ranks share it (STREAMK_PGAS_SHARE_GPU=1) if torch symmetric memory accepts
#                  that, otherwise the block prints 'skipped: needs 2 GPUs'
#   startup        heap start-up seconds of symm and of cuda (CUDA IPC) on the same ranks, side by side
# The per-step logs, the JSON summaries and summary.txt (one line per step) are written under the result folder.
set -uo pipefail
cd "$(dirname "$0")/.."
RES="${OUT:-$PWD/out/gpu_check_symm}"
mkdir -p "$RES"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
unset TRITON_INTERPRET IRIS_OPS_BACKEND
export IRIS_OPS_TIMEOUT_S="${IRIS_OPS_TIMEOUT_S:-180}"
PY="${PYTHON:-python3}"
PY="$(command -v "$PY" || echo "$PY")"  # an absolute path: mpirun may start its ranks with another PATH
MPIRUN="${MPIRUN:-$(command -v mpirun || echo "$(dirname "$(command -v "$PY")")/mpirun")}"
STEP_TIMEOUT="${STEP_TIMEOUT:-600}"
# Open MPI's shared-memory segments go to a private folder, removed at exit (a failed job can leave them behind)
MPI_SHM_DIR="$(mktemp -d)"
export OMPI_MCA_btl_sm_backing_directory="$MPI_SHM_DIR"
trap 'rm -rf "$MPI_SHM_DIR"' EXIT
SUMMARY="$RES/summary.txt"
: > "$SUMMARY"
FAILED=0

record() {  # record NAME STATUS [detail]
    echo "$1: $2${3:+ ($3)}" | tee -a "$SUMMARY"
}

step() {  # step NAME CMD...   runs CMD under timeout, output to NAME.log
    local name=$1; shift
    echo "== $name" | tee "$RES/$name.log"
    echo "$*" >> "$RES/$name.log"
    timeout --kill-after=20 "$STEP_TIMEOUT" "$@" >> "$RES/$name.log" 2>&1
    local rc=$?
    tail -n 15 "$RES/$name.log"
    if [ "$rc" = 0 ]; then record "$name" ok; else record "$name" "FAILED" "exit $rc, see $name.log"; FAILED=1; fi
    return "$rc"
}

mpicmd() {  # mpicmd NP [VAR=VALUE ...] -- CMD...   sets MPICMD, the mpirun command line (for `step`)
    local np=$1; shift
    MPICMD=("$MPIRUN" --allow-run-as-root --oversubscribe -np "$np" -x PYTHONPATH -x IRIS_OPS_TIMEOUT_S)
    while [ "$1" != "--" ]; do MPICMD+=(-x "$1"); shift; done
    shift
    MPICMD+=("$@")
}

verdicts() {  # verdicts JSON KIND: every case/check of a summary passed (skips allowed in device_ops)
    "$PY" - "$1" "$2" <<'EOF'
import json, sys
data = json.load(open(sys.argv[1]))
kind = sys.argv[2]
assert data.get("backend") == "symm", f"ran on backend {data.get('backend')!r}, not symm"
if kind == "device":
    bad = {c: r for c, r in data["cases"].items() if r["status"] not in ("pass", "skip", "xfail")}
    print(f"{len(data['cases'])} cases, {sum(r['status'] == 'pass' for r in data['cases'].values())} passed")
elif kind == "mixed":
    bad = {c: r for c, r in data["cases"].items() if not r["ok"]}
    if not data.get("heap_bases_ok"):
        bad["heap_bases"] = "heap bases inconsistent"
    print(f"{len(data['cases'])} cases; start-up {data['startup_s']} s")
else:
    bad = {c: r for c, r in data["checks"].items() if not r["ok"]}
    print(f"{len(data['checks'])} checks")
for c, r in bad.items():
    print(f"FAILED {c}: {r}")
sys.exit(1 if bad else 0)
EOF
}

# -- env ----------------------------------------------------------------------------------------------------------
step env "$PY" -c '
import torch, triton, shutil, subprocess
print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)
print("gpus", torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
import torch.distributed._symmetric_memory as sm
print("symm_mem ops:", {op: hasattr(torch.ops.symm_mem, op) for op in ("one_shot_all_reduce", "two_shot_all_reduce_")})
try:
    print("symm_mem backend:", sm.get_backend("cuda"))
except Exception as exc:
    print("symm_mem backend: unknown", exc)
if shutil.which("nvidia-smi"):
    print(subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True).stdout)
'
NGPU=$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ "$NGPU" -lt 1 ]; then
    record all "skipped: needs a CUDA GPU (torch sees $NGPU)"
    exit 1
fi

# -- the one-line error without a GPU -----------------------------------------------------------------------------
echo "== cpu_error" | tee "$RES/cpu_error.log"
CUDA_VISIBLE_DEVICES="" IRIS_OPS_BACKEND=symm timeout 120 "$PY" -c 'import iris_ops; iris_ops.iris(1 << 20)' \
    >> "$RES/cpu_error.log" 2>&1
last=$(tail -n 1 "$RES/cpu_error.log")
echo "$last"
case "$last" in
    "RuntimeError: IRIS_OPS_BACKEND=symm needs a CUDA GPU with torch symmetric memory;"*) record cpu_error ok ;;
    *) record cpu_error FAILED "last line: $last"; FAILED=1 ;;
esac

# -- one rank -----------------------------------------------------------------------------------------------------
mpicmd 1 IRIS_OPS_BACKEND=symm -- "$PY" tests/mpi/heap_api.py --json "$RES/heap_api_np1.json"
step heap_api_np1 "${MPICMD[@]}" \
    && { verdicts "$RES/heap_api_np1.json" heap >> "$RES/heap_api_np1.log" 2>&1 \
         || { record heap_api_np1 "FAILED" "checks, see heap_api_np1.log"; FAILED=1; }; }
mpicmd 1 IRIS_OPS_BACKEND=symm -- "$PY" tests/mpi/device_ops.py --json "$RES/device_np1.json"
step device_np1 "${MPICMD[@]}" \
    && { verdicts "$RES/device_np1.json" device >> "$RES/device_np1.log" 2>&1 \
         || { record device_np1 "FAILED" "cases, see device_np1.log"; FAILED=1; }; }
mpicmd 1 -- "$PY" tests/mpi/symm_mixed.py --json "$RES/mixed_np1.json"
step mixed_np1 "${MPICMD[@]}"
verdicts "$RES/mixed_np1.json" mixed >> "$RES/mixed_np1.log" 2>&1 || FAILED=1

# -- two ranks ----------------------------------------------------------------------------------------------------
SHARE=()
if [ "$NGPU" -lt 2 ]; then
    SHARE=(STREAMK_PGAS_SHARE_GPU=1)
    echo "== probe: 2 ranks sharing GPU 0 on torch symmetric memory" | tee "$RES/share_probe.log"
    if ! timeout --kill-after=20 300 "$MPIRUN" --allow-run-as-root --oversubscribe -np 2 -x PYTHONPATH \
            -x IRIS_OPS_TIMEOUT_S -x STREAMK_PGAS_SHARE_GPU=1 \
            "$PY" tests/mpi/symm_mixed.py --startup_only --json "$RES/share_probe.json" >> "$RES/share_probe.log" 2>&1; then
        tail -n 20 "$RES/share_probe.log"
        record np2 "skipped: needs 2 GPUs" "torch symmetric memory refused 2 ranks on one GPU; see share_probe.log"
        SHARE=(SKIP)
    fi
fi
if [ "${SHARE[0]:-}" != SKIP ]; then
    mpicmd 2 IRIS_OPS_BACKEND=symm ${SHARE[@]+"${SHARE[@]}"} -- "$PY" tests/mpi/heap_api.py --json "$RES/heap_api_np2.json"
    step heap_api_np2 "${MPICMD[@]}" \
        && { verdicts "$RES/heap_api_np2.json" heap >> "$RES/heap_api_np2.log" 2>&1 \
             || { record heap_api_np2 "FAILED" "checks, see heap_api_np2.log"; FAILED=1; }; }
    mpicmd 2 IRIS_OPS_BACKEND=symm ${SHARE[@]+"${SHARE[@]}"} -- "$PY" tests/mpi/device_ops.py --json "$RES/device_np2.json"
    step device_np2 "${MPICMD[@]}" \
        && { verdicts "$RES/device_np2.json" device >> "$RES/device_np2.log" 2>&1 \
             || { record device_np2 "FAILED" "cases, see device_np2.log"; FAILED=1; }; }
    mpicmd 2 IRIS_OPS_BACKEND=symm ${SHARE[@]+"${SHARE[@]}"} -- "$PY" tests/mpi/iris_host_api.py --json "$RES/host_api_np2.json"
    step host_api_np2 "${MPICMD[@]}" \
        && { verdicts "$RES/host_api_np2.json" host >> "$RES/host_api_np2.log" 2>&1 \
             || { record host_api_np2 "FAILED" "checks, see host_api_np2.log"; FAILED=1; }; }
    mpicmd 2 ${SHARE[@]+"${SHARE[@]}"} -- "$PY" tests/mpi/symm_mixed.py --json "$RES/mixed_np2.json"
    step mixed_np2 "${MPICMD[@]}"
    verdicts "$RES/mixed_np2.json" mixed >> "$RES/mixed_np2.log" 2>&1 || FAILED=1
    # heap start-up, symm beside CUDA IPC, on the same ranks (3 runs each; every run is a fresh job)
    for i in 1 2 3; do
        for b in symm cuda; do
            mpicmd 2 ${SHARE[@]+"${SHARE[@]}"} -- "$PY" tests/mpi/symm_mixed.py --backend "$b" --startup_only --json "$RES/startup_${b}_$i.json"
            step "startup_${b}_$i" "${MPICMD[@]}"
        done
    done
    "$PY" - "$RES" <<'EOF' | tee -a "$SUMMARY"
import json, pathlib, sys
res = pathlib.Path(sys.argv[1])
for b in ("symm", "cuda"):
    runs = [json.loads(p.read_text())["startup_s"] for p in sorted(res.glob(f"startup_{b}_*.json"))]
    print(f"startup {b}: per-run max over ranks (s): {[max(r) for r in runs]}")
EOF
fi

echo "results in $RES"
cat "$SUMMARY"
exit "$FAILED"
