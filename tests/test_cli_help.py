"""Every command-line entry point prints its help and exits 0 (a bare % in a help string once crashed one).

The entries run one after another in one process, each as `python -m MODULE --help` (or `python benchmark.py
--help`) would run it (runpy, as __main__, with that argv): importing torch and triton once, not once per entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MODULES = ["tools.gemm_sweep", "tools.gemm_bench", "tools.microbench", "tools.copy_engine_bench",
           "tools.cublas_kernels", "tools.compile_check", "tools.op_overhead", "tools.share_gpu_check", "reference"]
ENTRIES = [*MODULES, "benchmark.py"]

# One process: each entry as __main__ with its argv; stdout and the exit code (SystemExit's, 0 if none) of each.
RUN_ALL = r"""
import contextlib, io, json, runpy, sys
out = {}
for entry in json.loads(sys.argv[1]):
    sys.argv = [entry, "--help"]
    text, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(err):
        try:
            if entry.endswith(".py"):
                runpy.run_path(entry, run_name="__main__")
            else:
                runpy.run_module(entry, run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:
            code, err = 1, io.StringIO(f"{type(exc).__name__}: {exc}")
    out[entry] = {"code": code, "stdout": text.getvalue(), "stderr": err.getvalue()[-2000:]}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, dict]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", RUN_ALL, json.dumps(ENTRIES)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("entry", ENTRIES)
def test_help_exits_zero(entry: str, helps: dict[str, dict]) -> None:
    out = helps[entry]
    assert out["code"] == 0, out["stderr"]
    assert "usage:" in out["stdout"]
