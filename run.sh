#!/usr/bin/env bash
# Launch the reference baselines (python -m reference) on NUM_GPUS ranks.
# The launcher is mpirun when it is on PATH (with --allow-run-as-root when run as root), else
# torchrun; -l/--launcher overrides. Everything run.sh does not know is passed to the reference.
# Bad input (run.sh's own flags, or the reference's, checked in one process before any rank is
# launched) is one line on stderr naming the flag, and exit code 2.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROG="$(basename "$0")"
PYTHON="${PYTHON:-python}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
# The reference package is found from anywhere, and output paths stay relative to the caller.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
# The reference's own lists (reference.config.COLLECTIVES: each variant, the equal-output peers of each of our
# algorithms, all; spec.DATATYPES), so run.sh offers whatever the reference runs.
LISTS="$("$PYTHON" -c 'from streamk_pgas import spec; from streamk_pgas.reference.config import COLLECTIVES; print(" ".join(COLLECTIVES)); print("|".join(spec.DATATYPES))')" || {
    echo "$PROG: error: $PYTHON cannot import the reference (set PYTHON to the project's interpreter)" >&2; exit 2; }
COLLECTIVES="$(sed -n 1p <<<"$LISTS")"
DATATYPES="$(sed -n 2p <<<"$LISTS")"
USAGE="usage: $PROG -n NUM_GPUS -c COLLECTIVE [-l mpirun|torchrun] [-m M] [--n N] [-k K] [--datatype $DATATYPES] [--iters I] [--warmup W] [--validate] [--output_file F | --output_dir D] [-- reference flags...]"

usage_error() {
    echo "$PROG: error: $1 (see $PROG --help)" >&2
    exit 2
}

print_help() {
    cat <<EOF
$USAGE

Runs the vendor-library baselines of the distributed GEMMs (NCCL on NVIDIA, RCCL on AMD, gloo on
the CPU) on NUM_GPUS ranks and writes benchmark.py's JSON run log.

run.sh's own flags:
  -n, --num_gpus NUM_GPUS   ranks to launch (one per GPU), a positive integer (required)
  -c, --collective NAME     which baseline(s) (required):
$(for c in $COLLECTIVES; do echo "                              $c"; done)
  -l, --launcher NAME       mpirun or torchrun (default: mpirun if on PATH, else torchrun)
  -h, --help                this help

Passed through to 'python -m reference' (see 'python -m reference --help'):
  -m M, --n N, -k K         problem size C[M x N] = A[M x K] @ B[K x N] (-n is NUM_GPUS here,
                            so give N as --n N, or put reference flags after --); default 8192^3 bf16
                            on a GPU, on the CPU 48^3 fp32 (each rounded up to a multiple of NUM_GPUS)
  --datatype $DATATYPES, --iters I, --warmup W, --validate, --seed S, --timeout_s T,
  --output_file FILE, --output_dir DIR, --device auto|cuda|cpu, --gather_layout row_major|rank_blocked

The reference's flags are checked (for NUM_GPUS ranks, output paths included) before any rank is
launched: a bad one is one line on stderr and exit code 2. Under torchrun they follow a '--', so
that torchrun never reads them as its own (--n would be an ambiguous torchrun option).

Environment: PYTHON (interpreter, default python), MPIRUN_ARGS / TORCHRUN_ARGS (extra launcher flags).
Examples: $PROG -n 2 -c all_reduce --validate --output_dir results/logs     (the device's default size)
          $PROG -n 2 -c all_reduce -m 4864 --n 4096 -k 8256 --datatype bf16 --validate --output_dir results/logs
EOF
}

num_gpus=""
collective=""
launcher=""
passthrough=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) print_help; exit 0 ;;
        -n|--num_gpus)
            [[ $# -ge 2 ]] || usage_error "$1 needs a value (a positive integer)"
            [[ -z "$num_gpus" ]] || usage_error "$1 given twice: it is NUM_GPUS here; give the N dimension as --n N"
            num_gpus="$2"; shift 2 ;;
        --num_gpus=*) num_gpus="${1#*=}"; shift ;;
        -c|--collective)
            [[ $# -ge 2 ]] || usage_error "$1 needs a value (one of: $COLLECTIVES)"
            collective="$2"; shift 2 ;;
        --collective=*) collective="${1#*=}"; shift ;;
        -l|--launcher)
            [[ $# -ge 2 ]] || usage_error "$1 needs a value (mpirun or torchrun)"
            launcher="$2"; shift 2 ;;
        --launcher=*) launcher="${1#*=}"; shift ;;
        --) shift; passthrough+=("$@"); break ;;
        *) passthrough+=("$1"); shift ;;
    esac
done

[[ -n "$num_gpus" ]] || usage_error "-n NUM_GPUS is required (a positive integer)"
[[ "$num_gpus" =~ ^[1-9][0-9]*$ ]] || usage_error "-n must be a positive integer, got '$num_gpus'"
[[ -n "$collective" ]] || usage_error "-c COLLECTIVE is required (one of: $COLLECTIVES)"
case " $COLLECTIVES " in
    *" $collective "*) ;;
    *) usage_error "-c must be one of: $COLLECTIVES; got '$collective'" ;;
esac

if [[ -z "$launcher" ]]; then
    if command -v mpirun >/dev/null 2>&1; then launcher=mpirun; else launcher=torchrun; fi
fi
case "$launcher" in
    mpirun) command -v mpirun >/dev/null 2>&1 || usage_error "-l mpirun: mpirun is not on PATH" ;;
    torchrun) ;;
    *) usage_error "-l must be mpirun or torchrun, got '$launcher'" ;;
esac
ref_args=(--collective "$collective" ${passthrough[@]+"${passthrough[@]}"})
for arg in ${passthrough[@]+"${passthrough[@]}"}; do
    if [[ "$arg" == "-h" || "$arg" == "--help" ]]; then exec "$PYTHON" -m reference --help; fi
done
# The reference's own checks, in one process, before any rank starts: one line and exit 2 if bad.
"$PYTHON" -c 'import sys; from streamk_pgas.reference.cli import preflight; sys.exit(preflight(sys.argv[2:], int(sys.argv[1]), "run.sh"))' \
    "$num_gpus" "${ref_args[@]}" || exit $?

case "$launcher" in
    mpirun)
        cmd=(mpirun)
        [[ "$(id -u)" == "0" ]] && cmd+=(--allow-run-as-root)
        cmd+=(--oversubscribe -np "$num_gpus")
        # shellcheck disable=SC2206
        [[ -n "${MPIRUN_ARGS:-}" ]] && cmd+=($MPIRUN_ARGS)
        cmd+=("$PYTHON" -m reference)
        ;;
    torchrun)
        if command -v torchrun >/dev/null 2>&1; then cmd=(torchrun); else cmd=("$PYTHON" -m torch.distributed.run); fi
        cmd+=(--standalone --nproc_per_node "$num_gpus")
        # shellcheck disable=SC2206
        [[ -n "${TORCHRUN_ARGS:-}" ]] && cmd+=($TORCHRUN_ARGS)
        cmd+=(-m reference --)  # torchrun stops reading its own options at the '--'
        ;;
esac
cmd+=("${ref_args[@]}")

echo "$PROG: launcher: $launcher" >&2
echo "$PROG: command: ${cmd[*]}" >&2
exec "${cmd[@]}"
