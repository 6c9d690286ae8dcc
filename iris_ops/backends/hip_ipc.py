"""AMD backend: the heap is device memory shared through HIP IPC handles (hip-python).

Written to the same shape as the CUDA backend. It has not been run on an AMD GPU in this
project yet (no AMD machine was available); the calls are hip-python's names for the CUDA ones.
"""

from __future__ import annotations

from typing import Any

import torch


def _hip() -> Any:
    try:
        from hip import hip
    except ImportError as exc:
        raise ImportError("the HIP IPC heap backend needs hip-python: pip install 'streamk-pgas[hip]'") from exc
    return hip


def _check(result: Any, what: str) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")
    return rest[0] if len(rest) == 1 else rest


class HipIpcBackend:
    name = "hip"

    def __init__(self, local_rank: int) -> None:
        self.hip = _hip()
        torch.cuda.set_device(local_rank)  # ROCm torch names HIP devices "cuda"
        self.device = torch.device("cuda", local_rank)
        self._opened: list[Any] = []
        self._heap: torch.Tensor | None = None

    def allocate(self, heap_size: int) -> torch.Tensor:
        self._heap = torch.empty(heap_size, dtype=torch.uint8, device=self.device)
        return self._heap

    def export(self) -> Any:
        assert self._heap is not None
        ptr = self._heap.data_ptr()
        base, _size = _check(self.hip.hipMemGetAddressRange(ptr), "hipMemGetAddressRange")
        handle = _check(self.hip.hipIpcGetMemHandle(ptr), "hipIpcGetMemHandle")
        return {"handle": bytes(handle.reserved), "offset": ptr - int(base)}

    def open(self, handle: Any, peer: int) -> int:
        h = self.hip.hipIpcMemHandle_t()
        h.reserved = handle["handle"]
        base = _check(
            self.hip.hipIpcOpenMemHandle(h, self.hip.hipIpcMemLazyEnablePeerAccess), "hipIpcOpenMemHandle"
        )
        self._opened.append(base)
        return int(base) + handle["offset"]

    def after_all_mapped(self) -> None:
        return None

    def close(self) -> None:
        for base in self._opened:
            self.hip.hipIpcCloseMemHandle(base)
        self._opened.clear()
