"""CPU backend: each rank's heap is a file in /dev/shm that every rank maps.

Each process maps each file at an address of its own choosing, so heap bases differ between
processes and pointer translation is exercised for real; Triton's interpreter then loads,
stores and does atomics on the peers' pages directly.

A heap larger than the free space of SHM_DIR is refused (MemoryError with the sizes) before its
file is made: the file is sparse, so it would otherwise fail later with SIGBUS on the first page
that does not fit.

Cleanup: a rank removes its own file once every rank has mapped it (the mappings stay valid).
If a run fails before that, the file is removed at exit, on SIGTERM/SIGINT, or before the process
aborts an MPI job (bootstrap.register_cleanup), and files whose creating process is gone are swept
at the next start, so nothing stays in /dev/shm.
"""

from __future__ import annotations

import atexit
import contextlib
import mmap
import os
import signal
from pathlib import Path
from typing import Any

import torch

from iris_ops.bootstrap import register_cleanup, unregister_cleanup

SHM_DIR = Path(os.environ.get("IRIS_OPS_SHM_DIR", "/dev/shm"))
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


def space_problem(heap_size: int, ranks_on_node: int = 1) -> str | None:
    """Why `ranks_on_node` heaps of heap_size bytes do not fit in SHM_DIR, or None. The files are sparse
    until touched, so a heap past the free space would die with SIGBUS mid-run: refuse it up front."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError as exc:
        return f"cannot read the free space of {SHM_DIR} ({exc.strerror})"
    free = st.f_bavail * st.f_frsize
    need = heap_size * ranks_on_node
    if need > free:
        each = f"{ranks_on_node} x {heap_size} B = {need} B" if ranks_on_node > 1 else f"{heap_size} B"
        return (f"the symmetric heap needs {each} of {SHM_DIR} (shm backend), which has {free} B free "
                f"(of {st.f_blocks * st.f_frsize} B)")
    return None


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
            raise MemoryError(problem)
        self._guard()
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, heap_size)
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
        self._peer_views.clear()
        for m in self._maps:
            with contextlib.suppress(BufferError, ValueError):
                m.close()
        self._maps.clear()
