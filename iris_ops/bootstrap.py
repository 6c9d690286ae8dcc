"""Rank and world discovery, and the host-side collectives the heap needs to exchange handles.

Under `mpirun` the ranks come from mpi4py; under `torchrun` from its environment (RANK,
WORLD_SIZE, LOCAL_RANK, ...) with a gloo process group for the exchange; a plain `python`
process is a world of one. Every host collective waits at most `timeout_s` for all ranks: a rank
that died or never arrived turns into a `TimeoutError` (and, under MPI, an abort of the job)
instead of a hang.

Start-up is bounded too. MPI_Init waits for every rank of the job, so a rank that never starts
(stopped, or stuck before it imports mpi4py) would leave the others blocked in it for ever; and
mpi4py holds the GIL there, so no Python thread can time it out. `_Mpi` therefore starts a small
watchdog process first: if MPI start-up (MPI_Init and the first collective) has not finished within
the timeout, it prints one line and terminates this rank (SIGTERM, then SIGKILL), which makes mpirun
end the job with a non-zero exit code. The timeout is IRIS_OPS_TIMEOUT_S (iris_ops.env: seconds,
default 120, at least 5), or the program's own limit (iris_ops.env.set_host_timeout: benchmark.py's --timeout_s)
with at least 5 s for the launch (iris_ops.env.launch_timeout); `timeout_from_env` refuses a value out of range
with a ValueError naming it (start-up itself falls back to the default, so that the ranks can refuse the value
together once started).

Under MPI an exception that no one catches, on any rank, aborts the whole job (as
`python -m mpi4py` does) after running the cleanups registered with `register_cleanup` (the shm
backend removes its /dev/shm file there). Without that, the failing rank would block in
MPI_Finalize at exit while its peers wait for it. IRIS_OPS_ABORT_ON_ERROR=0 turns this off.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamk_pgas.iris_ops.env import (
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    MIN_TIMEOUT_S,
    TIMEOUT_ENV,
    abort_on_error,
    launch_timeout,
    timeout_from_env,
    timeout_source,
)

__all__ = ["DEFAULT_TIMEOUT_S", "MAX_TIMEOUT_S", "MIN_TIMEOUT_S", "TIMEOUT_ENV", "Bootstrap", "get_bootstrap",
           "launched_by", "launcher_rank", "launcher_world_size", "register_cleanup", "run_cleanups", "started",
           "startup_failure", "startup_watchdog", "timeout_from_env", "unregister_cleanup"]

_RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID", "RANK")


def launcher_rank() -> int:
    """This process's rank as the launcher announced it in the environment (0 without a launcher),
    known before any communication starts: errors found before start-up are printed by rank 0 only."""
    for key in _RANK_ENV:
        with contextlib.suppress(KeyError, ValueError):
            return int(os.environ[key])
    return 0


_SIZE_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE")


def launcher_world_size() -> int:
    """The number of ranks the launcher announced in the environment (1 without a launcher)."""
    for key in _SIZE_ENV:
        with contextlib.suppress(KeyError, ValueError):
            return int(os.environ[key])
    return 1


# The watchdog process: waits on a pipe that the rank closes once start-up is done (or that closes
# when the rank dies); if it stays open past the timeout, print the message and terminate the rank.
_WATCHDOG = r"""
import os, select, signal, sys, time
fd, pid, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
if select.select([fd], [], [], timeout)[0]:
    sys.exit(0)
sys.stderr.write(sys.argv[4] + "\n")
sys.stderr.flush()
for sig in (signal.SIGTERM, signal.SIGKILL):
    try:
        os.kill(pid, sig)
        for _ in range(20):
            time.sleep(0.1)
            os.kill(pid, 0)
    except ProcessLookupError:
        break
"""


@contextlib.contextmanager
def startup_watchdog(timeout_s: float, what: str, rank: int | None = None, limit_set_by: str | None = None) -> Any:
    """Terminate this process if the `with` body (e.g. MPI_Init, which holds the GIL while it waits
    for every rank) has not finished within timeout_s, after one line on stderr naming `what` and what sets the
    limit (`limit_set_by`, default: timeout_source())."""
    rank = launcher_rank() if rank is None else rank
    limit_set_by = limit_set_by or timeout_source()
    message = (f"iris_ops: rank {rank}: {what} did not complete within {timeout_s:g} s: another rank died or "
               f"never started ({limit_set_by} sets the limit); stopping this rank")
    read_end, write_end = os.pipe()
    try:
        watchdog = subprocess.Popen([sys.executable, "-S", "-c", _WATCHDOG, str(read_end), str(os.getpid()),
                                     repr(timeout_s), message], pass_fds=(read_end,), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL)
    finally:
        os.close(read_end)
    try:
        yield
    finally:
        os.close(write_end)  # the watchdog sees end-of-file and exits quietly
        with contextlib.suppress(subprocess.TimeoutExpired):
            watchdog.wait(timeout=5)


_cleanups: list[Callable[[], None]] = []


def register_cleanup(fn: Callable[[], None]) -> None:
    """Run `fn` before this process aborts the job (MPI_Abort skips atexit handlers)."""
    if fn not in _cleanups:
        _cleanups.append(fn)


def unregister_cleanup(fn: Callable[[], None]) -> None:
    with contextlib.suppress(ValueError):
        _cleanups.remove(fn)


def run_cleanups() -> None:
    """Run the registered cleanups, newest first; a failing one does not stop the others."""
    for fn in reversed(list(_cleanups)):
        with contextlib.suppress(Exception):
            fn()


class Bootstrap:
    """The host side of a world: rank, size, node-local placement, barrier, allgather, broadcast."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_size: int = 1
    launcher: str = "single"
    grace_s: float = 0.0  # added once to the next host wait's limit (allow_grace)

    def allow_grace(self, seconds: float) -> None:
        """Let the next host wait last `seconds` beyond its limit: this rank has just done work that every rank
        does and that takes each a different time, the first compile of a kernel on a GPU (seconds to a minute):
        the peers may still be at it, which a short limit would take for a lost peer."""
        self.grace_s += max(0.0, seconds)

    def _limit(self, timeout_s: float | None) -> float:
        """A host wait's limit: `timeout_s` (default: iris_ops.env's), plus the grace allowed since the last wait."""
        limit = (timeout_from_env() if timeout_s is None else timeout_s) + self.grace_s
        self.grace_s = 0.0
        return limit

    def barrier(self, timeout_s: float | None = None) -> None:
        return None

    def allgather(self, obj: Any, timeout_s: float | None = None) -> list[Any]:
        return [obj]

    def broadcast(self, obj: Any, root: int = 0, timeout_s: float | None = None) -> Any:
        return obj

    def abort(self, code: int = 1) -> None:
        sys.exit(code)


@dataclass
class _Single(Bootstrap):
    launcher: str = "single"


class _Mpi(Bootstrap):
    def __init__(self) -> None:
        with startup_watchdog(launch_timeout(), "MPI start-up"):
            from mpi4py import MPI  # MPI_Init: returns once every rank of the job has started

            self.MPI = MPI
            self.comm = MPI.COMM_WORLD
            self.rank = self.comm.Get_rank()
            self.world_size = self.comm.Get_size()
            node = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
            self.local_rank = node.Get_rank()
            self.local_size = node.Get_size()
            node.Free()
        self.launcher = "mpi"
        if self.world_size > 1 and abort_on_error():
            self._install_excepthook()

    def _install_excepthook(self) -> None:
        previous = sys.excepthook

        def abort_on_uncaught(exc_type: Any, exc: Any, tb: Any) -> None:
            previous(exc_type, exc, tb)
            sys.stderr.write(
                f"iris_ops: rank {self.rank}: uncaught {exc_type.__name__}; aborting the MPI job so that "
                "the other ranks do not wait for this one\n"
            )
            self.abort(1)

        sys.excepthook = abort_on_uncaught

    def _wait(self, req: Any, what: str, timeout_s: float | None) -> Any:
        """Poll a non-blocking MPI request until done or the deadline. The first 20 ms poll without
        sleeping (only yielding the CPU), so ranks leave a barrier within microseconds of each other:
        a rank that slept through the release would start its next timed iteration late, and its
        peers would wait for it. After that, sleeps back off to 1 ms."""
        start = time.monotonic()
        timeout_s = self._limit(timeout_s)
        deadline = start + timeout_s
        sleep = 1e-5
        while True:
            done, result = req.test()
            if done:
                return result
            now = time.monotonic()
            if now - start < 0.02:
                time.sleep(0)
                continue
            if now > deadline:
                raise TimeoutError(
                    f"rank {self.rank}: {what} did not complete within {timeout_s:.3g} s: "
                    f"another rank died or never arrived ({timeout_source()} sets the limit)"
                )
            time.sleep(sleep)
            sleep = min(sleep * 2, 1e-3)

    def barrier(self, timeout_s: float | None = None) -> None:
        self._wait(self.comm.Ibarrier(), "barrier", timeout_s)

    def allgather(self, obj: Any, timeout_s: float | None = None) -> list[Any]:
        # Meet first with a bounded wait, so the blocking exchange below only starts once all are here.
        self.barrier(timeout_s)
        return self.comm.allgather(obj)

    def broadcast(self, obj: Any, root: int = 0, timeout_s: float | None = None) -> Any:
        self.barrier(timeout_s)
        return self.comm.bcast(obj, root=root)

    def abort(self, code: int = 1) -> None:
        run_cleanups()
        sys.stdout.flush()
        sys.stderr.flush()
        self.comm.Abort(code)


class _TorchRun(Bootstrap):
    def __init__(self) -> None:
        import datetime

        import torch.distributed as dist

        self.dist = dist
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        self.local_size = int(os.environ.get("LOCAL_WORLD_SIZE", self.world_size))
        timeout_s = launch_timeout()
        try:
            if not dist.is_initialized():
                dist.init_process_group("gloo", rank=self.rank, world_size=self.world_size,
                                        timeout=datetime.timedelta(seconds=timeout_s))
                destroy_at_exit(None)
            # A gloo group of our own, so a user's NCCL default group is never used for the exchange.
            self.group = dist.new_group(backend="gloo")
            destroy_at_exit(self.group)
        except (RuntimeError, TimeoutError, ValueError) as exc:  # torch's DistError family: store timeouts, refusals
            raise TimeoutError(startup_failure(self.rank, "torch.distributed start-up", timeout_s, exc)) from None
        self.launcher = "torchrun"

    def barrier(self, timeout_s: float | None = None) -> None:
        import datetime

        timeout_s = self._limit(timeout_s)
        try:
            self.dist.monitored_barrier(group=self.group, timeout=datetime.timedelta(seconds=timeout_s))
        except RuntimeError as exc:  # gloo's timeout, or a peer that closed its connection
            raise TimeoutError(
                f"rank {self.rank}: barrier did not complete within {timeout_s:.3g} s: another rank died or never "
                f"arrived ({timeout_source()} sets the limit; {_first_line(exc)})"
            ) from None

    def allgather(self, obj: Any, timeout_s: float | None = None) -> list[Any]:
        self.barrier(timeout_s)
        out: list[Any] = [None] * self.world_size
        self.dist.all_gather_object(out, obj, group=self.group)
        return out

    def broadcast(self, obj: Any, root: int = 0, timeout_s: float | None = None) -> Any:
        self.barrier(timeout_s)
        box = [obj]
        self.dist.broadcast_object_list(box, src=root, group=self.group)
        return box[0]

    def abort(self, code: int = 1) -> None:
        run_cleanups()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def destroy_at_exit(group: Any) -> None:
    """Destroy a process group this library started (`group`; None: the default group) while the interpreter is
    still whole at exit: a gloo group left to interpreter finalization can abort the process (SIGABRT, "terminate
    called without an active exception") after the program's work is done. A group the program destroyed itself
    is left alone. Handlers run newest first, so a subgroup goes before the default group."""

    def destroy() -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            with contextlib.suppress(ValueError, RuntimeError):  # already destroyed by the program
                dist.destroy_process_group(group)

    atexit.register(destroy)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def startup_failure(rank: int, what: str, timeout_s: float, exc: BaseException,
                    limit_set_by: str | None = None) -> str:
    """The one line for a start-up that failed (e.g. torch's DistStoreError from init_process_group): the
    project's words, then the cause's first line."""
    return (f"rank {rank}: {what} did not complete within {timeout_s:g} s: another rank died or never started "
            f"({limit_set_by or timeout_source()} sets the limit; {_first_line(exc)})")


_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")
_cached: Bootstrap | None = None


def launched_by() -> str:
    """'mpi', 'torchrun' or 'single', from the environment the launcher left."""
    if any(k in os.environ for k in _MPI_ENV):
        return "mpi"
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return "torchrun"
    return "single"


def started() -> Bootstrap | None:
    """The process's world if get_bootstrap has made it, else None (nothing is started)."""
    return _cached


def get_bootstrap() -> Bootstrap:
    """The process's world (created once). mpi4py is imported only when mpirun started us."""
    global _cached
    if _cached is None:
        kind = launched_by()
        if kind == "mpi":
            _cached = _Mpi()
        elif kind == "torchrun":
            _cached = _TorchRun()
        else:
            _cached = _Single()
    return _cached
