"""Every command-line entry point prints its help and exits 0 (a bare % in a help string once crashed one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MODULES = ["harness.gemm_sweep", "harness.gemm_bench", "harness.microbench", "harness.copy_engine_bench",
           "harness.cublas_kernels", "tools.compile_check", "tools.op_overhead", "tools.share_gpu_check", "reference"]


@pytest.mark.parametrize("command", [[sys.executable, "-m", m, "--help"] for m in MODULES]
                         + [[sys.executable, "benchmark.py", "--help"]], ids=[*MODULES, "benchmark.py"])
def test_help_exits_zero(command):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage:" in out.stdout
