"""NVIDIA backend: the heap is device memory shared through CUDA IPC handles (cuda-python).

The heap is allocated by torch; its IPC handle names the whole driver allocation that holds it,
so the handle travels with the heap's offset inside that allocation. A peer opens the handle
(peer access enabled lazily) and adds the offset.
"""

from __future__ import annotations

from typing import Any

import torch

from streamk_pgas.iris_ops.env import SHARE_GPU_ENV as SHARE_GPU_ENV  # benchmark.py names the variable in its error
from streamk_pgas.iris_ops.env import share_gpu


def cuda_modules() -> tuple[Any, Any]:
    """cuda-python's driver and runtime modules (either package layout)."""
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


def check(result: Any, what: str) -> Any:
    """The value(s) of a cuda-python call's (error, value...) result; RuntimeError naming `what` on an error."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")
    return rest[0] if len(rest) == 1 else rest


def shared_gpu_index(local_rank: int) -> int:
    """The GPU of a local rank: its own, or with STREAMK_PGAS_SHARE_GPU=1 (a correctness test of the multi-rank
    protocol on a machine with fewer GPUs than ranks: the ranks' kernels time-slice one GPU, so never time
    it) local_rank modulo the GPUs there are."""
    if share_gpu():
        return local_rank % max(1, torch.cuda.device_count())
    return local_rank


class CudaIpcBackend:
    name = "cuda"

    def __init__(self, local_rank: int) -> None:
        self.driver, self.runtime = cuda_modules()
        index = shared_gpu_index(local_rank)
        torch.cuda.set_device(index)
        self.device = torch.device("cuda", index)
        self._opened: list[int] = []
        self._heap: torch.Tensor | None = None

    def allocate(self, heap_size: int) -> torch.Tensor:
        self._heap = torch.empty(heap_size, dtype=torch.uint8, device=self.device)
        return self._heap

    def export(self) -> Any:
        assert self._heap is not None
        ptr = self._heap.data_ptr()
        base, _size = check(
            self.driver.cuMemGetAddressRange(self.driver.CUdeviceptr(ptr)), "cuMemGetAddressRange"
        )
        handle = check(self.runtime.cudaIpcGetMemHandle(ptr), "cudaIpcGetMemHandle")
        return {"handle": bytes(handle.reserved), "offset": ptr - int(base)}

    def open(self, handle: Any, peer: int) -> int:
        h = self.runtime.cudaIpcMemHandle_t()
        h.reserved = handle["handle"]
        base = check(
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
