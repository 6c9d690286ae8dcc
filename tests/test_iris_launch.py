"""How an iris_ops job starts and ends: a plain python process is a world of one; a job whose rank
crashes, exits early or never arrives ends in bounded time with a non-zero exit code, and leaves no
heap file in /dev/shm (shm backend)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MPI_DIR, REPO_ROOT, on_gpu, run_mpi, skip_unless_ranks

from iris_ops.backends import shm

TIMEOUT_S = 5  # IRIS_OPS_TIMEOUT_S for these jobs
BOUND_S = 30  # a failing job must be over within this


def _heap_files(output: str) -> list[Path]:
    return [Path(p) for p in re.findall(r"^HEAP_FILE (\S+)$", output, flags=re.MULTILINE)]


def _job_leftovers(files: list[Path]) -> list[Path]:
    """Every file in the heap directory that belongs to the jobs these heap files came from."""
    left: list[Path] = []
    for f in files:
        job = f.name[len(shm.PREFIX) + 1 :].split("_r")[0]
        left += sorted(f.parent.glob(f"{shm.PREFIX}_{job}_*"))
    return left


def test_plain_python_is_a_world_of_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMI", "PMIX_", "SLURM_")) and k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    code = (
        "import iris_ops, torch\n"
        "from iris_ops.bootstrap import get_bootstrap, launched_by\n"
        "sh = iris_ops.iris(1 << 20)\n"
        "b = get_bootstrap()\n"
        "path = getattr(sh._backend, 'path', None)\n"
        "x = sh.ones(4)\n"
        "sh.barrier()\n"
        "print(launched_by(), b.launcher, sh.get_rank(), sh.get_num_ranks(), len(sh.get_heap_bases()),\n"
        "      sh.broadcast('hello'), sh.allgather(7), int(x.sum()), path is None or not path.exists())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["single", "single", "0", "1", "1", "hello", "[7]", "4", "True"]


def test_clean_job_leaves_no_heap_files() -> None:
    skip_unless_ranks(2)
    result = run_mpi(2, MPI_DIR / "heap_failures.py", "ok", timeout=120)
    files = _heap_files(result.stdout)
    if not on_gpu():
        assert len(files) == 2, result.stdout
    assert result.stdout.count("finished") == 2
    assert not [f for f in files if f.exists()]
    assert not _job_leftovers(files)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["raise_after_heap", "exit1_after_heap", "raise_while_mapping"])
def test_crashing_rank_fails_the_job_and_leaves_no_heap_files(mode: str) -> None:
    skip_unless_ranks(2)
    result = run_mpi(2, MPI_DIR / "heap_failures.py", mode, timeout=120, check=False,
                     env={"IRIS_OPS_TIMEOUT_S": str(TIMEOUT_S)})
    assert not result.timed_out, result.stdout[-4000:]
    assert result.returncode != 0, result.stdout[-4000:]
    assert result.elapsed_s < BOUND_S, f"took {result.elapsed_s:.1f} s:\n{result.stdout[-4000:]}"
    assert "finished" not in result.stdout
    files = _heap_files(result.stdout)
    if not on_gpu():
        assert len(files) == 2, f"both ranks should have created a heap file:\n{result.stdout[-4000:]}"
    assert not [f for f in files if f.exists()], f"left behind: {[f for f in files if f.exists()]}"
    assert not _job_leftovers(files)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["late", "exit_before_heap"])
def test_rank_that_never_arrives_fails_the_others_in_bounded_time(mode: str) -> None:
    skip_unless_ranks(2)
    result = run_mpi(2, MPI_DIR / "heap_failures.py", mode, timeout=120, check=False,
                     env={"IRIS_OPS_TIMEOUT_S": str(TIMEOUT_S)})
    assert not result.timed_out, f"the job hung:\n{result.stdout[-4000:]}"
    assert result.returncode != 0, result.stdout[-4000:]
    assert result.elapsed_s < BOUND_S, f"took {result.elapsed_s:.1f} s:\n{result.stdout[-4000:]}"
    assert f"did not complete within {TIMEOUT_S} s" in result.stdout, result.stdout[-4000:]
    files = _heap_files(result.stdout)
    assert not [f for f in files if f.exists()]
    assert not _job_leftovers(files)


def test_stale_heap_files_are_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of processes killed with SIGKILL (no cleanup ran) are removed when the next heap is made."""
    monkeypatch.setattr(shm, "SHM_DIR", tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{shm.PREFIX}_deadjob_r0_pid{dead.pid}"
    alive = tmp_path / f"{shm.PREFIX}_livejob_r0_pid{os.getpid()}"
    other = tmp_path / "unrelated_file"
    for f in (stale, alive, other):
        f.write_bytes(b"x")
    shm.sweep_stale_files()
    assert not stale.exists()
    assert alive.exists() and other.exists()
