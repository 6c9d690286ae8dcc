#!/usr/bin/env bash
# The test suite on a fresh machine: install with the test extras, then pytest (multi-rank tests
# run under mpirun inside). Without a GPU everything runs on the CPU backend in Triton's interpreter.
# pytest's exit code 5 (no tests collected) counts as a failure.
source "$(dirname "$0")/env.sh" test
set +e
python -m pytest -q tests "$@"
rc=$?
if [ "$rc" = 5 ]; then echo "pytest collected no tests: failing" >&2; rc=1; fi
exit "$rc"
