#!/usr/bin/env bash
# The test suite on a fresh machine: install with the test extras, then pytest (multi-rank tests
# run under mpirun inside). Without a GPU everything runs on the CPU backend in Triton's interpreter.
# pytest's exit code 5 (no tests collected) counts as a failure.
source "$(dirname "$0")/env.sh" test
set +e
# Which torch and Triton this run tests, against the range pyproject.toml states (tests/test_versions.py fails outside).
python -m streamk_pgas.versions
# Two workers, one test file each at a time: a file's module fixtures are made once, and the tests that use
# torchrun's fixed port (tests/test_iris_entry.py) run one after another; every test has its own shm folder. Files go
# out in collection order, the longest first (tests/conftest.py: LONGEST_FILES), so none is left to run alone at the end.
python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder tests "$@"
rc=$?
if [ "$rc" = 5 ]; then echo "pytest collected no tests: failing" >&2; rc=1; fi
exit "$rc"
