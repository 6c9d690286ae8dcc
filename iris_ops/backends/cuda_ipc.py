"""NVIDIA backend: the heap is device memory shared through CUDA IPC handles (cuda-python): ipc.IpcBackend with
the CUDA calls.
"""

from __future__ import annotations

from typing import Any

import torch

from streamk_pgas.iris_ops.backends.ipc import IpcBackend, check
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


def shared_gpu_index(local_rank: int) -> int:
    """The GPU of a local rank: its own, or with STREAMK_PGAS_SHARE_GPU=1 (a correctness test of the multi-rank
    protocol on a machine with fewer GPUs than ranks: the ranks' kernels time-slice one GPU, so never time
    it) local_rank modulo the GPUs there are."""
    if share_gpu():
        return local_rank % max(1, torch.cuda.device_count())
    return local_rank


class CudaIpcBackend(IpcBackend):
    name = "cuda"

    def __init__(self, local_rank: int) -> None:
        self.driver, self.runtime = cuda_modules()
        super().__init__(shared_gpu_index(local_rank))

    def _allocation_base(self, ptr: int) -> Any:
        base, _size = check(
            self.driver.cuMemGetAddressRange(self.driver.CUdeviceptr(ptr)), "cuMemGetAddressRange"
        )
        return base

    def _ipc_handle(self, ptr: int) -> Any:
        return check(self.runtime.cudaIpcGetMemHandle(ptr), "cudaIpcGetMemHandle")

    def _open_handle(self, reserved: bytes) -> Any:
        h = self.runtime.cudaIpcMemHandle_t()
        h.reserved = reserved
        base = check(
            self.runtime.cudaIpcOpenMemHandle(h, self.runtime.cudaIpcMemLazyEnablePeerAccess),
            "cudaIpcOpenMemHandle",
        )
        return int(base)

    def _close_handle(self, base: Any) -> None:
        self.runtime.cudaIpcCloseMemHandle(base)
