"""run.sh argument handling: help, bad or missing flags (no ranks are launched by these: one line and exit
code 2; the reference's own flags are in tests/test_bad_inputs.py), and a run under torchrun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamk_pgas.reference.config import COLLECTIVES

ROOT = Path(__file__).resolve().parent.parent
RUN_SH = ROOT / "run.sh"



def run_sh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUN_SH), *args], capture_output=True, text=True, timeout=60)


def test_executable() -> None:
    assert os.access(RUN_SH, os.X_OK)


def test_help_lists_every_collective_of_the_reference_and_the_flags() -> None:
    res = run_sh("--help")
    assert res.returncode == 0, res.stderr
    listed = res.stdout.split("which baseline(s) (required):")[1].split("-l, --launcher")[0].split()
    assert listed == list(COLLECTIVES)
    assert {"all_gather_gemm", "gemm_reduce_scatter"} <= set(listed)
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
def test_bad_arguments_exit_2_with_one_line(args: tuple[str, ...], needle: str) -> None:
    res = run_sh(*args)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("run.sh: error: "), res.stderr
    assert needle in res.stderr and "see run.sh --help" in res.stderr
    assert res.stdout == ""


def test_torchrun_gets_the_reference_flags(tmp_path: Path) -> None:
    """`-l torchrun ... --n 32`: torchrun must not read --n as its own (ambiguous) option; the reference
    gets it, runs, and leaves no shared-memory file behind."""
    out, shm = tmp_path / "ar.json", tmp_path / "shm"
    shm.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "IRIS_OPS_"))}
    env.update(PYTHON=sys.executable, PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
               OMP_NUM_THREADS="1", IRIS_OPS_SHM_DIR=str(shm), OMPI_MCA_btl_sm_backing_directory=str(shm))
    res = subprocess.run([str(RUN_SH), "-n", "2", "-l", "torchrun", "-c", "all_reduce", "-m", "16", "--n", "32", "-k",
                          "16", "--datatype", "fp32", "--iters", "2", "--warmup", "1", "--validate", "--output_file",
                          str(out)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    rec = json.loads(out.read_text())
    assert rec["launcher"] == "torchrun" and rec["sizes"]["n"] == 32 and rec["validation"]["passed"]
    assert sorted(p.name for p in shm.iterdir()) == []


def test_every_collective_at_the_cpu_defaults_in_under_a_minute(tmp_path: Path) -> None:
    """`-c all` with no size: the CPU's default problem (48^3 fp32 on 2 ranks), every variant validated or skipped
    (symmetric memory needs a GPU), one line each with a rate that reads (no 0.0 TFLOP/s) and no unstable-timing
    warning (a CPU run's spread says nothing)."""
    shm = tmp_path / "shm"
    shm.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "IRIS_OPS_"))}
    env.update(PYTHON=sys.executable, PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
               OMP_NUM_THREADS="1", OMPI_MCA_btl_sm_backing_directory=str(shm))
    start = time.monotonic()
    res = subprocess.run([str(RUN_SH), "-n", "2", "-c", "all", "--validate", "--output_dir", str(tmp_path / "logs")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    elapsed = time.monotonic() - start
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert elapsed < 60, f"{elapsed:.0f} s"
    lines = [line for line in res.stdout.splitlines() if " W=2: " in line]
    assert len(lines) == len(COLLECTIVES["all"]) and all("fp32 48x48x48 W=2" in line for line in lines), res.stdout
    assert all("validation passed" in line or "skipped" in line for line in lines), res.stdout
    assert "0.0 TFLOP/s" not in res.stdout and "unstable" not in res.stdout + res.stderr
