"""The acceptance tools of issue 22 (tools/), run on the CPU: the op's overhead over its GEMM with one rank
(tools.op_overhead, tiny shapes, few calls) and every algorithm x mode on 2 ranks, steps back to back with
rotating user tensors and C read between them (tools.share_gpu_check, on the shm heap). On a GPU the same tools
run at their full sizes (README, "The op from a torch program")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, on_gpu, run_mpi, shm_env

from streamk_pgas import spec

COMBOS = sum(len(a.modes) for a in spec.ALGORITHMS.values())


@pytest.mark.slow
def test_op_overhead_on_the_cpu(tmp_path: Path) -> None:
    """Every algorithm x mode at one tiny shape: right, timed against the GEMM alone, host time measured, the GEMM
    the op planned named; the JSON has one row per combination; exit 0."""
    if on_gpu():
        pytest.skip("the GPU run is the acceptance itself (python -m tools.op_overhead)")
    out = tmp_path / "overhead.json"
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    res = subprocess.run([sys.executable, "-m", "tools.op_overhead", "--shapes", "48x64x32", "--calls", "2",
                          "--loops", "1", "--datatype", "fp32", "--output", str(out)], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == COMBOS
    for r in rows:
        assert r["ok"] and r["max_rel_err"] <= r["tolerance"], r
        assert r["launches"] == ["streamk_gemm_kernel"], r  # one rank: the GEMM alone
        assert r["op_ms"] > 0 and r["gemm_ms"] > 0 and r["host_us"] > 0 and r["gemm_host_us"] > 0
        assert r["graph_ok"] is None


def test_op_overhead_refuses_a_bad_flag() -> None:
    from streamk_pgas.tools.op_overhead import main

    assert main(["--modes", "overlapped"]) == 2
    assert main(["--shapes", "64x64"]) == 2


@pytest.mark.slow
def test_share_gpu_check_on_two_ranks(tmp_path: Path) -> None:
    """Every algorithm x mode on 2 ranks of the shm heap: steps back to back with three pairs of user tensors in
    rotation and a row of C read between every two steps, every row checked."""
    res = run_mpi(2, "tools.share_gpu_check", "--steps", "4", module=True, timeout=900, env=shm_env(tmp_path / "shm"))
    out = res.stdout
    assert "SHARE_FAIL" not in out, out
    ok = [line.split()[1:3] for line in out.splitlines() if line.startswith("SHARE_OK ")]
    assert len(ok) == COMBOS and f"SHARE_DONE {COMBOS} combinations" in out, out
