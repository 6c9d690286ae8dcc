"""run.sh argument handling: help, bad or missing flags (no ranks are launched by these)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_SH = ROOT / "run.sh"
COLLECTIVES = ("all_reduce", "all_gather", "gemm", "symm_mem_all_reduce", "fused_all_gather_matmul",
               "fused_matmul_reduce_scatter", "all")


def run_sh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUN_SH), *args], capture_output=True, text=True, timeout=60)


def test_executable() -> None:
    assert os.access(RUN_SH, os.X_OK)


def test_help_lists_collectives_and_flags() -> None:
    res = run_sh("--help")
    assert res.returncode == 0, res.stderr
    for name in COLLECTIVES:
        assert name in res.stdout
    for flag in ("-n", "-c", "-l", "--launcher", "--datatype", "--validate", "--output_dir"):
        assert flag in res.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("-c", "all_reduce"), "-n NUM_GPUS is required"),
        (("-n", "2"), "-c COLLECTIVE is required"),
        (("-n", "2", "-c", "all_reduc"), "-c must be one of"),
        (("-n", "0", "-c", "gemm"), "-n must be a positive integer"),
        (("-n", "two", "-c", "gemm"), "-n must be a positive integer"),
        (("-n", "2", "-c", "gemm", "-n", "64"), "given twice"),
        (("-n", "2", "-c", "gemm", "-l", "srun"), "-l must be mpirun or torchrun"),
        (("-n",), "needs a value"),
    ],
)
def test_bad_arguments_exit_2_with_usage(args: tuple[str, ...], needle: str) -> None:
    res = run_sh(*args)
    assert res.returncode == 2
    assert needle in res.stderr
    assert "usage: run.sh" in res.stderr
    assert res.stdout == ""
