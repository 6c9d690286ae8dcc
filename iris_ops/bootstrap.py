"""Rank and world discovery, and the host-side collectives the heap needs to exchange handles.

Under `mpirun` the ranks come from mpi4py; under `torchrun` from its environment (RANK,
WORLD_SIZE, LOCAL_RANK, ...) with a gloo process group for the exchange; a plain `python`
process is a world of one. Every host collective waits at most `timeout_s` for all ranks: a rank
that died or never arrived turns into a `TimeoutError` (and, under MPI, an abort of the job)
instead of a hang.

Under MPI an exception that no one catches, on any rank, aborts the whole job (as
`python -m mpi4py` does) after running the cleanups registered with `register_cleanup` (the shm
backend removes its /dev/shm file there). Without that, the failing rank would block in
MPI_Finalize at exit while its peers wait for it. IRIS_OPS_ABORT_ON_ERROR=0 turns this off.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_TIMEOUT_S = float(os.environ.get("IRIS_OPS_TIMEOUT_S", "120"))

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
        from mpi4py import MPI

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank = node.Get_rank()
        self.local_size = node.Get_size()
        node.Free()
        self.launcher = "mpi"
        if self.world_size > 1 and os.environ.get("IRIS_OPS_ABORT_ON_ERROR", "1") != "0":
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
        deadline = start + (DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s)
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
                    f"rank {self.rank}: {what} did not complete within {timeout_s or DEFAULT_TIMEOUT_S:.0f} s: "
                    "another rank died or never arrived (IRIS_OPS_TIMEOUT_S sets the limit)"
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
        if not dist.is_initialized():
            dist.init_process_group(
                "gloo", rank=self.rank, world_size=self.world_size,
                timeout=datetime.timedelta(seconds=DEFAULT_TIMEOUT_S),
            )
        # A gloo group of our own, so a user's NCCL default group is never used for the exchange.
        self.group = dist.new_group(backend="gloo")
        self.launcher = "torchrun"

    def barrier(self, timeout_s: float | None = None) -> None:
        import datetime

        self.dist.monitored_barrier(
            group=self.group, timeout=datetime.timedelta(seconds=timeout_s or DEFAULT_TIMEOUT_S)
        )

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


_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")
_cached: Bootstrap | None = None


def launched_by() -> str:
    """'mpi', 'torchrun' or 'single', from the environment the launcher left."""
    if any(k in os.environ for k in _MPI_ENV):
        return "mpi"
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return "torchrun"
    return "single"


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
