#!/usr/bin/env bash
# The main job on a fresh machine: install, then run one_shot on 2 ranks with validation and timing,
# writing the JSON log to results/logs/quickstart/. Extra arguments go to benchmark.py.
#   ./scripts/quickstart.sh                       # GPU: 8192^3 bf16; no GPU: small shape in the interpreter
#   NP=4 ./scripts/quickstart.sh --algorithm all_scatter --mode fused
source "$(dirname "$0")/env.sh" ""
NP="${NP:-2}"
OUTPUT="results/logs/quickstart/$(date +%Y%m%d-%H%M%S).json"
echo "+ ${MPIRUN[*]} -np $NP python benchmark.py --algorithm one_shot --validate --benchmark --output_file $OUTPUT $*" >&2
exec "${MPIRUN[@]}" -np "$NP" python benchmark.py --algorithm one_shot --validate --benchmark \
  --output_file "$OUTPUT" "$@"
