"""Shared test helpers: run a program under mpirun on the CPU backend (or on GPUs where there are some).

    from conftest import run_mpi
    result = run_mpi(2, "tests/mpi/prog.py", "--flag", timeout=120)   # asserts exit code 0
    result.stdout, result.returncode, result.elapsed_s

Without a GPU (or with TRITON_INTERPRET=1 already set) the ranks run Triton's interpreter on the
shm backend: TRITON_INTERPRET=1 is set for them. On a GPU machine they run compiled kernels, one
rank per GPU. MPIRUN overrides the launcher (default: the mpirun next to this Python, else PATH).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from streamk_pgas.iris_ops.env import on_gpu  # the ranks run compiled kernels on GPUs (not the interpreter)

REPO_ROOT = Path(__file__).resolve().parent.parent
MPI_DIR = Path(__file__).resolve().parent / "mpi"


def load_mpi_script(filename: str, name: str) -> ModuleType:
    """tests/mpi/`filename` loaded as module `name` without running its main (to read its list of cases / checks)."""
    spec = importlib.util.spec_from_file_location(name, MPI_DIR / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(MPI_DIR))  # its imports of the scripts beside it resolve as when it runs
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(MPI_DIR))
    return module


def max_ranks() -> int:
    """How many ranks a test may start: one per GPU on a GPU machine, any number on the CPU."""
    if on_gpu():
        import torch

        return torch.cuda.device_count()
    return 64


def skip_unless_ranks(nprocs: int) -> None:
    if nprocs > max_ranks():
        pytest.skip(f"{nprocs} ranks need {nprocs} GPUs; this machine has {max_ranks()}")


def mpirun_path() -> str:
    if os.environ.get("MPIRUN"):
        return os.environ["MPIRUN"]
    beside = Path(sys.executable).parent / "mpirun"
    found = str(beside) if beside.exists() else shutil.which("mpirun")
    if not found:
        pytest.skip("mpirun not found (`pip install .` brings Open MPI's on Linux; or set MPIRUN)")
    return found


@dataclass
class MpiResult:
    returncode: int
    stdout: str  # stdout and stderr together
    elapsed_s: float
    timed_out: bool
    ended_at: float = 0.0  # time.time() when the job was seen to end


def _launch(nprocs: int, script: str | Path, args: tuple[str, ...], env: dict[str, str] | None,
            module: bool) -> tuple[list[str], subprocess.Popen, float]:
    """Start `python script args...` on nprocs ranks under mpirun, in a process group of its own."""
    skip_unless_ranks(nprocs)
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    if not on_gpu():
        full_env["TRITON_INTERPRET"] = "1"
    full_env.update(env or {})
    target = ["-m", str(script)] if module else [str(script)]
    cmd = [mpirun_path(), "--allow-run-as-root", "--oversubscribe", "-np", str(nprocs),
           sys.executable, *target, *map(str, args)]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    return cmd, proc, start


def _finish(proc: subprocess.Popen, start: float, timeout: float) -> MpiResult:
    """Wait for a job _launch started; on timeout kill its whole process group (mpirun and its ranks)."""
    timed_out = False
    out = ""
    try:
        out, _ = proc.communicate(timeout=max(0.0, timeout - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        timed_out = True
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)  # the group this job started: mpirun and its ranks
            except ProcessLookupError:
                break
            try:
                out, _ = proc.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
    ended_at = time.time()
    return MpiResult(proc.returncode if proc.returncode is not None else -9, out or "", time.monotonic() - start,
                     timed_out, ended_at)


def run_mpi(nprocs: int, script: str | Path, *args: str, timeout: float = 300, check: bool = True,
            env: dict[str, str] | None = None, module: bool = False) -> MpiResult:
    """Run `python script args...` (or `python -m script` with module=True) on nprocs ranks.

    With check=True a non-zero exit or a timeout fails the test and shows the output.
    On timeout the whole process group of mpirun is killed. More ranks than the machine has GPUs: skipped
    (benchmark.py refuses to start them, one rank per GPU).
    """
    cmd, proc, start = _launch(nprocs, script, args, env, module)
    result = _finish(proc, start, timeout)
    if check and (result.timed_out or result.returncode != 0):
        what = f"timed out after {timeout:.0f} s" if result.timed_out else f"exited with {result.returncode}"
        pytest.fail(f"{' '.join(cmd)} {what}; output:\n{result.stdout[-8000:]}", pytrace=False)
    return result


def run_mpi_many(jobs: dict[str, tuple[int, str | Path, list[str], dict[str, str]]],
                 timeout: float = 300) -> dict[str, MpiResult]:
    """run_mpi(nprocs, script, *args, env=env, check=False) of every job {name: (nprocs, script, args, env)} at
    once: for jobs that mostly wait (on a timeout, on a stopped peer), whose waits then overlap."""
    started = {name: _launch(n, script, tuple(args), env, False) for name, (n, script, args, env) in jobs.items()}
    with ThreadPoolExecutor(max_workers=len(started)) as pool:
        done = {name: pool.submit(_finish, proc, start, timeout) for name, (_, proc, start) in started.items()}
        return {name: future.result() for name, future in done.items()}


def shm_env(folder: Path) -> dict[str, str]:
    """Put the shared-memory files of a run (the heap's and Open MPI's) in `folder` instead of /dev/shm, so a
    test can check that nothing is left without seeing other jobs' files."""
    folder.mkdir(parents=True, exist_ok=True)
    return {"IRIS_OPS_SHM_DIR": str(folder), "OMPI_MCA_btl_sm_backing_directory": str(folder)}


def leftovers(folder: Path, wait_s: float = 3.0) -> list[str]:
    """What is still in `folder` (given a moment to go: mpirun's daemon removes Open MPI's files last)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = sorted(p.name for p in folder.iterdir())
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


# The files that take longest under the interpreter on a 2-core CI machine, longest first (pytest --durations: from
# about one to six minutes of a worker's time each). scripts/test.sh runs the files on two workers, handed out in
# collection order as workers free up (--dist loadfile --no-loadscope-reorder): a long file handed out last would run
# alone at the end.
LONGEST_FILES = ("test_benchmark.py", "test_new_algorithms.py", "test_world8.py", "test_op.py", "test_sweep.py",
                 "test_readme.py", "test_tools.py", "test_compile_check.py", "test_compile_unaligned.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (LONGEST_FILES), the others after them in their usual order."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
