"""NVIDIA backend: the heap is device memory shared through CUDA IPC handles (cuda-python).

The heap is allocated by torch; its IPC handle names the whole driver allocation that holds it,
so the handle travels with the heap's offset inside that allocation. A peer opens the handle
(peer access enabled lazily) and adds the offset.
"""

from __future__ import annotations

from typing import Any

import torch


def _cuda_modules() -> tuple[Any, Any]:
    try:
        from cuda.bindings import driver, runtime
    except ImportError:  # cuda-python < 12.6 layout
        try:
            from cuda import cuda as driver  # type: ignore[no-redef]
            from cuda import cudart as runtime  # type: ignore[no-redef]
        except ImportError as exc:
            raise ImportError(
                "the CUDA IPC heap backend needs cuda-python: pip install 'streamk-pgas[cuda]'"
            ) from exc
    return driver, runtime


def _check(result: Any, what: str) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")
    return rest[0] if len(rest) == 1 else rest


class CudaIpcBackend:
    name = "cuda"

    def __init__(self, local_rank: int) -> None:
        self.driver, self.runtime = _cuda_modules()
        torch.cuda.set_device(local_rank)
        self.device = torch.device("cuda", local_rank)
        self._opened: list[int] = []
        self._heap: torch.Tensor | None = None

    def allocate(self, heap_size: int) -> torch.Tensor:
        self._heap = torch.empty(heap_size, dtype=torch.uint8, device=self.device)
        return self._heap

    def export(self) -> Any:
        assert self._heap is not None
        ptr = self._heap.data_ptr()
        base, _size = _check(
            self.driver.cuMemGetAddressRange(self.driver.CUdeviceptr(ptr)), "cuMemGetAddressRange"
        )
        handle = _check(self.runtime.cudaIpcGetMemHandle(ptr), "cudaIpcGetMemHandle")
        return {"handle": bytes(handle.reserved), "offset": ptr - int(base)}

    def open(self, handle: Any, peer: int) -> int:
        h = self.runtime.cudaIpcMemHandle_t()
        h.reserved = handle["handle"]
        base = _check(
            self.runtime.cudaIpcOpenMemHandle(h, self.runtime.cudaIpcMemLazyEnablePeerAccess),
            "cudaIpcOpenMemHandle",
        )
        self._opened.append(int(base))
        return int(base) + handle["offset"]

    def after_all_mapped(self) -> None:
        return None

    def close(self) -> None:
        for base in self._opened:
            self.runtime.cudaIpcCloseMemHandle(base)
        self._opened.clear()
