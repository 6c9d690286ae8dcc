"""How an iris_ops job starts and ends: a plain python process is a world of one; a job whose rank
crashes, is killed, exits early, hangs, never arrives or never starts ends in bounded time
(IRIS_OPS_TIMEOUT_S) with a non-zero exit code, and leaves no shared-memory file behind (shm backend).

The jobs put their shared-memory files (the heaps', IRIS_OPS_SHM_DIR, and Open MPI's sm_segment.*,
OMPI_MCA_btl_sm_backing_directory) in a folder of their own instead of /dev/shm, which must be empty
afterwards: other jobs on the machine use /dev/shm at the same time, and their files must not count."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MPI_DIR, REPO_ROOT, MpiResult, leftovers, on_gpu, run_mpi, run_mpi_many, shm_env, skip_unless_ranks

from streamk_pgas.iris_ops.backends import shm

TIMEOUT_S = 5  # IRIS_OPS_TIMEOUT_S for these jobs
BOUND_S = 30  # a failing job must be over within this


def _heap_files(output: str) -> list[Path]:
    return [Path(p) for p in re.findall(r"^HEAP_FILE (\S+)$", output, flags=re.MULTILINE)]


def _private_shm(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    folder = tmp_path / "shm"
    return folder, {**shm_env(folder), "IRIS_OPS_TIMEOUT_S": str(TIMEOUT_S)}


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
        "import torch\n"
        "from streamk_pgas import iris_ops\n"
        "from streamk_pgas.iris_ops.bootstrap import get_bootstrap, launched_by\n"
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


def test_clean_job_leaves_no_heap_files(tmp_path: Path) -> None:
    skip_unless_ranks(2)
    folder, env = _private_shm(tmp_path)
    result = run_mpi(2, MPI_DIR / "heap_failures.py", "ok", timeout=120, env=env)
    files = _heap_files(result.stdout)
    if not on_gpu():
        assert len(files) == 2, result.stdout
        assert all(f.parent == folder for f in files)
    assert result.stdout.count("finished") == 2
    assert not [f for f in files if f.exists()]
    assert not _job_leftovers(files)
    assert leftovers(folder) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["raise_after_heap", "exit1_after_heap", "raise_while_mapping", "os_exit_after_heap",
                                  "kill_after_heap"])
def test_crashing_rank_fails_the_job_and_leaves_no_heap_files(mode: str, tmp_path: Path) -> None:
    """A rank that raises, exits, os._exit()s (no cleanup, no MPI_Finalize) or is killed (SIGKILL)."""
    skip_unless_ranks(2)
    folder, env = _private_shm(tmp_path)
    result = run_mpi(2, MPI_DIR / "heap_failures.py", mode, timeout=120, check=False, env=env)
    assert not result.timed_out, result.stdout[-4000:]
    assert result.returncode != 0, result.stdout[-4000:]
    assert result.elapsed_s < BOUND_S, f"took {result.elapsed_s:.1f} s:\n{result.stdout[-4000:]}"
    assert "finished" not in result.stdout
    files = _heap_files(result.stdout)
    if not on_gpu():
        assert len(files) == 2, f"both ranks should have created a heap file:\n{result.stdout[-4000:]}"
    assert not [f for f in files if f.exists()], f"left behind: {[f for f in files if f.exists()]}"
    assert not _job_leftovers(files)
    assert leftovers(folder) == []


NEVER_ARRIVES = ("late", "exit_before_heap", "hang_after_heap", "never_starts")


@pytest.fixture(scope="module")
def never_arrives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[MpiResult, Path]]:
    """The jobs of test_rank_that_never_arrives_fails_the_others_in_bounded_time, all at once (each mostly waits
    for its timeout): mode -> (the job, its shared-memory folder)."""
    skip_unless_ranks(2)
    tmp = tmp_path_factory.mktemp("never_arrives")
    private = {mode: _private_shm(tmp / mode) for mode in NEVER_ARRIVES}
    jobs = {mode: (2, MPI_DIR / "heap_failures.py", [mode], env) for mode, (_, env) in private.items()}
    return {mode: (result, private[mode][0]) for mode, result in run_mpi_many(jobs, timeout=120).items()}


@pytest.mark.slow
@pytest.mark.parametrize("mode", NEVER_ARRIVES)
def test_rank_that_never_arrives_fails_the_others_in_bounded_time(mode: str, never_arrives: dict) -> None:
    """A rank that arrives too late, leaves early, hangs (never reaches a barrier) or never starts (stuck
    before MPI_Init, where the others would wait for ever but for the start-up watchdog)."""
    result, folder = never_arrives[mode]
    assert not result.timed_out, f"the job hung:\n{result.stdout[-4000:]}"
    assert result.returncode != 0, result.stdout[-4000:]
    assert result.elapsed_s < BOUND_S, f"took {result.elapsed_s:.1f} s:\n{result.stdout[-4000:]}"
    assert f"did not complete within {TIMEOUT_S} s" in result.stdout, result.stdout[-4000:]
    if mode == "never_starts":
        assert "MPI start-up did not complete" in result.stdout, result.stdout[-4000:]
    assert "finished" not in result.stdout
    files = _heap_files(result.stdout)
    assert not [f for f in files if f.exists()]
    assert not _job_leftovers(files)
    assert leftovers(folder) == []


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


def test_runs_outside_mpirun_leave_no_shared_memory(tmp_path: Path) -> None:
    """Plain python (benchmark.py, and the reference, both writing a log): no MPI singleton is made (it
    would leave Open MPI's 16 MiB sm_segment.* behind) and the heap's file is gone."""
    folder, env = _private_shm(tmp_path)
    plain = {k: v for k, v in os.environ.items()
             if not k.startswith(("OMPI_", "PMI", "PMIX_", "SLURM_", "IRIS_OPS_")) and k not in ("RANK", "WORLD_SIZE")}
    env = {**plain, **env, "PYTHONPATH": str(REPO_ROOT)}
    if not on_gpu():
        env["TRITON_INTERPRET"] = "1"
    runs = {
        "bench.json": [str(REPO_ROOT / "benchmark.py"), "-m", "32", "-n", "32", "-k", "32"],
        "ref.json": ["-m", "reference", "--collective", "gemm", "-m", "16", "-n", "16", "-k", "16",
                     "--datatype", "fp32", "--iters", "1", "--warmup", "0"],
    }
    for log, args in runs.items():
        out = subprocess.run([sys.executable, *args, "--output_file", str(tmp_path / log)], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
        assert leftovers(folder) == [], log
        record = json.loads((tmp_path / log).read_text())
        assert record["software"]["mpi_library"] is None  # MPI was not started to ask its version
