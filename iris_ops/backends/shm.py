"""CPU backend: each rank's heap is a file in /dev/shm that every rank maps.

Each process maps each file at an address of its own choosing, so heap bases differ between
processes and pointer translation is exercised for real; Triton's interpreter then loads,
stores and does atomics on the peers' pages directly.

A heap larger than the free space of SHM_DIR is refused (MemoryError with the sizes) before its
file is made, and the file's space is reserved when it is made (posix_fallocate): a file that only
grew when written would fail later with SIGBUS on the first page that does not fit, e.g. when two
jobs that passed the free-space check together fill the folder. A reservation that fails removes the
file and raises HeapReserveError (a MemoryError) naming the bytes asked for, the free bytes and the
folder; Iris turns one rank's failure into the same error on every rank.

Cleanup: a rank removes its own file once every rank has mapped it (the mappings stay valid).
If a run fails before that, the file is removed at exit, on SIGTERM/SIGINT, or before the process
aborts an MPI job (bootstrap.register_cleanup), and files whose creating process is gone are swept
at the next start, so nothing stays in /dev/shm.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import mmap
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import torch

from streamk_pgas.iris_ops.bootstrap import register_cleanup, unregister_cleanup
from streamk_pgas.iris_ops.env import shm_dir
from streamk_pgas.iris_ops.errors import HeapReserveError

SHM_DIR = shm_dir()  # IRIS_OPS_SHM_DIR (checked by iris_ops.env.check)
PREFIX = "iris_ops_heap"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_files() -> None:
    """Remove heap files left by processes that no longer exist (e.g. killed with SIGKILL)."""
    for f in SHM_DIR.glob(f"{PREFIX}_*"):
        try:
            pid = int(f.name.rsplit("_pid", 1)[1])
        except (IndexError, ValueError):
            continue
        if not _pid_alive(pid):
            with contextlib.suppress(OSError):
                f.unlink()


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged file may still take in `folder`, or None if they cannot be read."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _refusal(asked: str, folder: Path, free: int | None, why: str = "") -> str:
    """The one line for a heap that cannot be had in `folder`: what was asked for, what is free, where."""
    free_text = f"{free} B free" if free is not None else "free space unreadable"
    return (f"cannot reserve the symmetric heap: {asked} asked for in {folder} (shm backend), {free_text} "
            f"there{why}: use a smaller heap, or free {folder} (other jobs may hold the rest)")


def reserve_problem(heap_size: int, folder: Path, exc: OSError) -> str:
    """The one line for a heap file whose space could not be reserved."""
    why = "" if exc.errno == errno.ENOSPC else f" ({exc.strerror})"
    return _refusal(f"{heap_size} B", folder, free_bytes(folder), why)


def space_problem(heap_size: int, ranks_on_node: int = 1) -> str | None:
    """Why `ranks_on_node` heaps of heap_size bytes do not fit in SHM_DIR, or None: the answer for the whole
    node before any file is made (each file's own reservation, at creation, is what guarantees its space)."""
    free = free_bytes(SHM_DIR)
    if free is None:
        return f"cannot read the free space of {SHM_DIR} (shm backend)"
    need = heap_size * ranks_on_node
    if need > free:
        asked = f"{ranks_on_node} x {heap_size} B = {need} B" if ranks_on_node > 1 else f"{heap_size} B"
        return _refusal(asked, SHM_DIR, free)
    return None


RESERVE_TRIES = 3  # reservations tried while the folder seems to have room (see _reserve)


def _reserve(fd: int, size: int) -> None:
    """Give the file its `size` bytes now (posix_fallocate). Two jobs reserving at once can both fail although
    one of them would fit (tmpfs gives a failed reservation's pages back): a reservation that failed for
    want of space while the folder has room again is tried again after a random pause, RESERVE_TRIES in all."""
    for attempt in range(RESERVE_TRIES):
        try:
            os.posix_fallocate(fd, 0, size)
            return
        except OSError as exc:
            free = free_bytes(SHM_DIR)
            if exc.errno != errno.ENOSPC or attempt == RESERVE_TRIES - 1 or free is None or free < size:
                raise
        time.sleep(random.uniform(0.05, 0.5))


class ShmBackend:
    name = "shm"

    def __init__(self, rank: int, job_id: str) -> None:
        self.rank = rank
        self.device = torch.device("cpu")
        self.path = SHM_DIR / f"{PREFIX}_{job_id}_r{rank}_pid{os.getpid()}"
        self._maps: list[mmap.mmap] = []
        self._peer_views: list[torch.Tensor] = []
        self._own: mmap.mmap | None = None
        self._prev_handlers: dict[int, Any] = {}

    # -- lifetime of the name ------------------------------------------------------------
    def _unlink(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._unlink()
        prev = self._prev_handlers.get(signum)
        if callable(prev):
            prev(signum, frame)
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def _guard(self) -> None:
        atexit.register(self._unlink)
        register_cleanup(self._unlink)  # MPI_Abort skips atexit
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError):  # not the main thread
                self._prev_handlers[sig] = signal.signal(sig, self._on_signal)

    def _unguard(self) -> None:
        atexit.unregister(self._unlink)
        unregister_cleanup(self._unlink)
        for sig, prev in self._prev_handlers.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, prev)
        self._prev_handlers.clear()

    # -- HeapBackend ------------------------------------------------------------------------
    def allocate(self, heap_size: int) -> torch.Tensor:
        sweep_stale_files()
        problem = space_problem(heap_size)
        if problem:
            raise HeapReserveError(problem)
        self._guard()
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, heap_size)
            try:
                _reserve(fd, heap_size)
            except OSError as exc:
                self._unlink()
                self._unguard()
                raise HeapReserveError(reserve_problem(heap_size, SHM_DIR, exc)) from None
            self._own = mmap.mmap(fd, heap_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        return torch.frombuffer(self._own, dtype=torch.uint8, count=heap_size)

    def export(self) -> Any:
        return {"path": str(self.path), "size": len(self._own) if self._own is not None else 0}

    def open(self, handle: Any, peer: int) -> int:
        fd = os.open(handle["path"], os.O_RDWR)
        try:
            m = mmap.mmap(fd, handle["size"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._maps.append(m)
        view = torch.frombuffer(m, dtype=torch.uint8, count=handle["size"])
        self._peer_views.append(view)  # keeps the mapping referenced while kernels use it
        return view.data_ptr()

    def after_all_mapped(self) -> None:
        self._unlink()
        self._unguard()

    def close(self) -> None:
        self._unlink()
        self._unguard()
        self._peer_views.clear()
        for m in self._maps:
            with contextlib.suppress(BufferError, ValueError):
                m.close()
        self._maps.clear()
