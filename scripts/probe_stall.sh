#!/usr/bin/env bash
# Issue 34's stall probe on a GPU machine (NP GPUs, 4 by default): one rank stopped with SIGSTOP in each phase of a
# run must end every rank within 1.5 x --timeout_s, with one line. Writes under $OUT (default ./out/probe_stall):
#   summary.txt      one line per probe: phase, seconds from the stop to the job's end, exit code, within bound or not
#   <phase>.log      the job's output;  env.txt  GPUs, versions, commit
#
#   bash scripts/probe_stall.sh                         # every phase, 8192^3 all_reduce fused, --timeout_s 5
#   NP=2 TIMEOUT_S=5 PHASES="isolated external" bash scripts/probe_stall.sh
#
# Phases: startup barrier validation isolated back_to_back graph reference (tests/mpi/bench_stall.py: rank 1 stops
# itself at that point), and `external`, the issue's own probe: the benchmark with --iters 100000 --benchmark,
# rank 1 stopped from outside (kill -STOP) once the timed isolated steps have run for a while.
set -uo pipefail
cd "$(dirname "$0")/.."
NP="${NP:-4}"
TIMEOUT_S="${TIMEOUT_S:-5}"
SHAPE=(-m "${M:-8192}" -n "${N:-8192}" -k "${K:-8192}")
PHASES="${PHASES:-startup barrier validation isolated back_to_back graph reference external}"
OUT="${OUT:-$(pwd)/out}/probe_stall"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
# PROBE_STALL_TOKEN marks this script's rank processes (leftover() finds a stopped one its job did not end)
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PROBE_STALL_TOKEN="probe-$$"
MPI=(mpirun -np "$NP" --bind-to none -x PYTHONPATH -x PROBE_STALL_TOKEN)
[ "$(id -u)" = 0 ] && MPI=(mpirun --allow-run-as-root -np "$NP" --bind-to none -x PYTHONPATH -x PROBE_STALL_TOKEN)
BOUND=$(awk -v t="$TIMEOUT_S" 'BEGIN { print 1.5 * t }')
RUN=(--algorithm all_reduce --mode fused "${SHAPE[@]}" --timeout_s "$TIMEOUT_S")
BENCH=("${RUN[@]}" --quiet)

{ nvidia-smi; nvidia-smi topo -m; git rev-parse HEAD 2>/dev/null || cat .commit 2>/dev/null
  "$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; which mpirun
  mpirun --version | head -n 1; } > "$OUT/env.txt" 2>&1
: > "$OUT/summary.txt"

report() {  # report PHASE STOP_FILE END RC: one summary line
  local phase=$1 stop_file=$2 end=$3 rc=$4 after verdict
  if [ -s "$stop_file" ]; then
    after=$(awk -v e="$end" -v s="$(cat "$stop_file")" 'BEGIN { printf "%.2f", e - s }')
    verdict=$(awk -v a="$after" -v b="$BOUND" 'BEGIN { print (a < b) ? "within" : "OVER" }')
  else
    after="-"; verdict="NOT STOPPED"
  fi
  local line
  line=$(grep -aE "^(benchmark.py|python -m reference): rank [0-9]+: " "$OUT/$phase.log" | head -n 1)
  printf '%-13s %8s s after the stop (bound %s s: %s), exit %s; %s\n' "$phase" "$after" "$BOUND" "$verdict" "$rc" \
    "${line:-no line from a rank}" | tee -a "$OUT/summary.txt"
}

leftover() {  # a stopped rank that its job did not end (it would hold its GPU): killed, and said
  local p
  for p in $(pgrep -f "tests/mpi/bench_stall.py|benchmark.py"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "PROBE_STALL_TOKEN=$PROBE_STALL_TOKEN"; then
      echo "probe_stall.sh: rank process $p outlived its job; killed" | tee -a "$OUT/summary.txt"
      kill -KILL "$p"
    fi
  done
}

probe() {  # probe PHASE FLAGS...: rank 1 stops itself in PHASE (tests/mpi/bench_stall.py)
  local phase=$1; shift
  local stop_file="$OUT/$phase.stopped"
  rm -f "$stop_file"
  timeout --kill-after=10 600 "${MPI[@]}" -x STALL_PHASE="$phase" -x STALL_FILE="$stop_file" \
    "$PY" tests/mpi/bench_stall.py "$@" > "$OUT/$phase.log" 2>&1
  local rc=$?
  report "$phase" "$stop_file" "$(date +%s.%N)" "$rc"
  leftover
}

external() {  # the issue's probe: rank 1 stopped from outside during the timed isolated steps
  local stop_file="$OUT/external.stopped" pid="" p
  rm -f "$stop_file"
  timeout --kill-after=10 900 "${MPI[@]}" "$PY" benchmark.py "${RUN[@]}" --benchmark --iters 100000 \
    > "$OUT/external.log" 2>&1 &
  local job=$!
  # the first progress line of the timed steps (rank 0 prints one after ~10 s of a phase)
  for _ in $(seq 600); do grep -aq "isolated steps:" "$OUT/external.log" && break; sleep 1; done
  for p in $(pgrep -f "benchmark.py ${RUN[*]}"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" &&
       tr '\0' '\n' < "/proc/$p/environ" | grep -qx "PROBE_STALL_TOKEN=$PROBE_STALL_TOKEN"; then pid=$p; fi
  done
  if [ -n "$pid" ] && grep -aq "isolated steps:" "$OUT/external.log"; then
    date +%s.%N > "$stop_file"
    kill -STOP "$pid"
  fi
  wait "$job"
  local rc=$?
  report external "$stop_file" "$(date +%s.%N)" "$rc"
  leftover
}

# One run without a stall first: the kernels compile here (a cold Triton cache takes tens of seconds, and ranks finish
# compiling apart: the benchmark allows for that once, on top of --timeout_s), so the probes time the phases only.
echo "warm-up: compiling the probes' kernels" | tee -a "$OUT/summary.txt"
timeout --kill-after=10 900 "${MPI[@]}" "$PY" benchmark.py "${BENCH[@]}" --validate --benchmark --graph --iters 2 \
  --warmup 1 > "$OUT/warmup.log" 2>&1 || echo "warm-up failed (exit $?): see warmup.log" | tee -a "$OUT/summary.txt"

for phase in $PHASES; do
  case "$phase" in
    startup) probe startup "${BENCH[@]}" --validate ;;
    barrier|isolated|back_to_back) probe "$phase" "${BENCH[@]}" --benchmark --iters 20 --warmup 2 ;;
    validation) probe validation "${BENCH[@]}" --validate ;;
    graph) probe graph "${BENCH[@]}" --benchmark --graph --iters 20 --warmup 2 ;;
    reference) probe reference --collective all_reduce "${SHAPE[@]}" --datatype bf16 --iters 20 --warmup 2 \
                 --timeout_s "$TIMEOUT_S" --quiet ;;
    external) external ;;
    *) echo "probe_stall.sh: error: unknown phase $phase" >&2; exit 2 ;;
  esac
done
echo "logs: $OUT"
