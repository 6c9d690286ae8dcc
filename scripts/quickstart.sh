#!/usr/bin/env bash
# The main job on a fresh machine: install, then run one_shot on NP ranks (2) with validation and timing
# (`streamk-pgas quickstart`: mpirun with the flags it needs here, as root too; else torchrun), writing the JSON log
# to results/logs/quickstart/. Extra arguments go to benchmark.py.
#   ./scripts/quickstart.sh                       # GPU: 8192^3 bf16; no GPU: small shape in the interpreter
#   NP=4 ./scripts/quickstart.sh --algorithm all_scatter --mode fused
source "$(dirname "$0")/env.sh" ""
exec streamk-pgas quickstart --np "${NP:-2}" --output_file "results/logs/quickstart/$(date +%Y%m%d-%H%M%S).json" "$@"
