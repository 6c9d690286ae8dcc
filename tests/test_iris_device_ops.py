"""The iris_ops device API under mpirun, on 1, 2 and 4 ranks: one launch per world size runs every case.

tests/mpi/device_ops.py runs the whole matrix of tests/mpi/device_cases.py (every operation x dtype,
aimed at every rank in turn, values encoding source, target and lane, masked-off lanes and guard
regions checked, atomics' old values checked) and writes a JSON verdict per case; each case is one
test here, so a failure names its operation, dtype and world size.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import MPI_DIR, load_mpi_script, on_gpu, run_mpi, skip_unless_ranks

DEVICE_CASES = load_mpi_script("device_cases.py", "iris_device_cases")
CASES: list[str] = DEVICE_CASES.CASES


@pytest.fixture(
    scope="module",
    params=[1, 2, pytest.param(4, marks=pytest.mark.slow)],
    ids=lambda n: f"np{n}",
)
def device_results(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    nprocs = request.param
    skip_unless_ranks(nprocs)
    summary = tmp_path_factory.mktemp(f"device_ops_np{nprocs}") / "summary.json"
    result = run_mpi(nprocs, MPI_DIR / "device_ops.py", "--json", str(summary), timeout=600 if on_gpu() else 240)
    assert summary.exists(), f"device_ops.py wrote no summary; output:\n{result.stdout[-4000:]}"
    data = json.loads(summary.read_text())
    data["output"] = result.stdout
    return data


def test_summary_is_complete(device_results: dict[str, Any]) -> None:
    """Every case ran (none silently missing) under the expected execution mode."""
    assert sorted(device_results["cases"]) == sorted(CASES)
    assert device_results["interpreter"] == (not on_gpu())
    assert device_results["backend"] in (("cuda", "hip") if on_gpu() else ("shm",))


@pytest.mark.parametrize("case", CASES)
def test_device_op(device_results: dict[str, Any], case: str) -> None:
    res = device_results["cases"].get(case)
    assert res is not None, f"case {case} did not run; output:\n{device_results['output'][-4000:]}"
    if res["status"] == "skip":
        pytest.skip(res["reason"])
    if res["status"] == "xfail":
        pytest.xfail(res["reason"])
    details = "\n".join(res["errors"])
    assert res["status"] == "pass", f"{case} on {device_results['world_size']} rank(s): {res['reason']}\n{details}"


def test_interpreter_gaps_are_exactly_the_known_ones(device_results: dict[str, Any]) -> None:
    """Only the documented interpreter gaps are skipped (e.g. bf16 atomic_add: 'Unsupported data type')."""
    skipped = {c for c, r in device_results["cases"].items() if r["status"] == "skip"}
    if not on_gpu():
        assert skipped <= set(DEVICE_CASES.INTERPRETER_GAPS)
    else:
        assert not skipped, f"cases skipped on the GPU: {sorted(skipped)}"
