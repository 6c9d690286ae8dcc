"""The faults a run must survive with one line and a known exit code, end to end on the CPU backend (2 ranks,
Triton's interpreter): non-finite inputs are named as such; run logs are strict JSON. (A rank stopped in any phase:
test_stall.py; a rank whose wait gives up fails every rank: tests/mpi/op_api.py's timeout check; bad paths, values
and variables: test_bad_inputs.py; two jobs that together exceed /dev/shm: test_iris_heap_reserve.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, on_gpu, shm_env

from streamk_pgas.harness.runlog import check_record

BENCH = str(REPO_ROOT / "benchmark.py")
SMALL = ["--algorithm", "one_shot", "--mode", "fused", "-m", "32", "-n", "32", "-k", "32", "--BLK_M", "16",
         "--BLK_N", "16", "--BLK_K", "16", "--total_sms", "2", "--gemm_sms", "1", "--num_stages", "1",
         "--num_warps", "1", "--datatype", "fp32"]


def strict_json(text: str) -> object:
    """json.loads that refuses NaN and Infinity, as strict parsers (JavaScript's JSON.parse, jq) do."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.skipif(on_gpu(), reason="one small run on the CPU backend is enough")
def test_nan_inputs_are_named_and_the_log_is_strict_json(tmp_path: Path) -> None:
    """NaN and Inf in the inputs: validation says the inputs are not finite (it does not blame a kernel's tile);
    the run fails (exit 1, a FAIL line) and its log holds null where a value is NaN, listed under "nonfinite"."""
    code = ("import sys, torch; import streamk_pgas.harness.fixture as f; draw = f.random_inputs\n"
            "def poisoned(shape, *rest):\n"
            "    t = draw(shape, *rest); t.view(-1)[:3] = torch.tensor([float('nan'), float('inf'), float('nan')])\n"
            "    return t\n"
            "f.random_inputs = poisoned\n"
            "import benchmark; sys.exit(benchmark.main(sys.argv[1:]))")
    log = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-c", code, *SMALL, "--validate", "--output_file", str(log)],
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
                          env={**shm_env(tmp_path / "shm"), "PATH": "/usr/bin:/bin", "TRITON_INTERPRET": "1"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert ("VALIDATION FAILED (isolated, 1 step(s)): rank 0 global: the inputs are not finite (A holds 2 NaN and "
            "1 Inf; B holds 2 NaN and 1 Inf): C = A @ B is not defined there") in out, out
    assert "wrong tile" not in out and out.rstrip().endswith("FAIL: 1 of 1 run(s) validated on every rank; CPU "
                                                             "backend: times are the interpreter's, not GPU figures")
    record = strict_json(log.read_text())
    assert check_record(record) == []
    assert record["validation"]["passed"] is False
    assert record["validation"]["ranks"][0]["global"]["nonfinite_inputs"] == {"A": {"nan": 2, "inf": 1},
                                                                              "B": {"nan": 2, "inf": 1}}
