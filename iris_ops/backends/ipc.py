"""What the CUDA and HIP backends share: the heap is device memory allocated by torch and shared through the
vendor's IPC handle (cuda_ipc, hip_ipc).

The IPC handle names the whole driver allocation that holds the heap, so the handle travels with the heap's offset
inside that allocation. A peer opens the handle (peer access enabled lazily) and adds the offset. A subclass names
the vendor's calls for the four steps (the allocation's base, its handle, opening and closing a peer's).
"""

from __future__ import annotations

from typing import Any

import torch


def check(result: Any, what: str) -> Any:
    """The value(s) of a cuda-python / hip-python call's (error, value...) result; RuntimeError naming `what` on an
    error."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")
    return rest[0] if len(rest) == 1 else rest


class IpcBackend:
    """A HeapBackend on the GPU `index` whose heap is shared by IPC handle; the subclass supplies the vendor calls."""

    name = ""

    def __init__(self, index: int) -> None:
        torch.cuda.set_device(index)  # ROCm torch names HIP devices "cuda" too
        self.device = torch.device("cuda", index)
        self._opened: list[Any] = []
        self._heap: torch.Tensor | None = None

    # ---- the vendor's calls -------------------------------------------------------------------------------------
    def _allocation_base(self, ptr: int) -> Any:
        """The base address of the driver allocation that holds `ptr`."""
        raise NotImplementedError

    def _ipc_handle(self, ptr: int) -> Any:
        """The IPC handle (with its bytes in `.reserved`) of the allocation that holds `ptr`."""
        raise NotImplementedError

    def _open_handle(self, reserved: bytes) -> Any:
        """Open a peer's IPC handle from its bytes (peer access enabled lazily); the base it is mapped at."""
        raise NotImplementedError

    def _close_handle(self, base: Any) -> None:
        """Unmap a base `_open_handle` returned."""
        raise NotImplementedError

    # ---- the HeapBackend shape ----------------------------------------------------------------------------------
    def allocate(self, heap_size: int) -> torch.Tensor:
        self._heap = torch.empty(heap_size, dtype=torch.uint8, device=self.device)
        return self._heap

    def export(self) -> Any:
        assert self._heap is not None
        ptr = self._heap.data_ptr()
        base = self._allocation_base(ptr)
        handle = self._ipc_handle(ptr)
        return {"handle": bytes(handle.reserved), "offset": ptr - int(base)}

    def open(self, handle: Any, peer: int) -> int:
        base = self._open_handle(handle["handle"])
        self._opened.append(base)
        return int(base) + handle["offset"]

    def after_all_mapped(self) -> None:
        return None

    def close(self) -> None:
        for base in self._opened:
            self._close_handle(base)
        self._opened.clear()
