"""How ranks map each other's heaps. One module per mechanism, all with the `HeapBackend` shape.

- `shm`: POSIX shared memory files, for the CPU and Triton's interpreter.
- `cuda_ipc`: CUDA IPC handles through cuda-python (imported only when chosen).
- `hip_ipc`: HIP IPC handles through hip-python (imported only when chosen).
- `ipc`: what cuda_ipc and hip_ipc share (the IpcBackend base class they fill with their calls).
- `torch_symm` (`symm`): torch's symmetric memory (torch.distributed._symmetric_memory), on the
  world process group, which it starts if nobody has (imported only when chosen; never automatic).

`choose_backend` picks one: the `backend` argument, else IRIS_OPS_BACKEND, else the interpreter
or a machine without a GPU -> shm, a ROCm torch -> hip, otherwise cuda.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from streamk_pgas.iris_ops.env import BACKEND_ENV, BACKENDS, backend_from_env, gpu_backend

__all__ = ["BACKENDS", "HeapBackend", "choose_backend", "make_backend"]


class HeapBackend(Protocol):
    name: str
    device: torch.device

    def allocate(self, heap_size: int) -> torch.Tensor:
        """This rank's heap: a uint8 tensor of heap_size bytes."""

    def export(self) -> Any:
        """A picklable handle that lets peers map this rank's heap."""

    def open(self, handle: Any, peer: int) -> int:
        """Map peer's heap from its handle; the address of its first byte in this process."""

    def after_all_mapped(self) -> None:
        """Called once every rank has mapped every heap (e.g. remove names nobody needs any more)."""

    def close(self) -> None:
        """Unmap the peers' heaps."""


def choose_backend(requested: str | None = None) -> str:
    name = requested.lower() if requested else backend_from_env()
    if name == "auto":
        backend = gpu_backend()
        return "shm" if backend == "cpu" else backend
    if name not in BACKENDS:
        raise ValueError(f"{BACKEND_ENV} / backend must be one of auto, {', '.join(BACKENDS)}; got {name!r}")
    return name


def make_backend(name: str, rank: int, local_rank: int, job_id: str, bootstrap: Any = None) -> HeapBackend:
    """The backend called `name` for this rank (`bootstrap`, the world's host side, is needed by symm only)."""
    if name == "shm":
        from streamk_pgas.iris_ops.backends.shm import ShmBackend

        return ShmBackend(rank, job_id)
    if name == "cuda":
        from streamk_pgas.iris_ops.backends.cuda_ipc import CudaIpcBackend

        return CudaIpcBackend(local_rank)
    if name == "hip":
        from streamk_pgas.iris_ops.backends.hip_ipc import HipIpcBackend

        return HipIpcBackend(local_rank)
    if name == "symm":
        from streamk_pgas.iris_ops.backends.torch_symm import TorchSymmBackend

        if bootstrap is None:
            from streamk_pgas.iris_ops.bootstrap import get_bootstrap

            bootstrap = get_bootstrap()
        return TorchSymmBackend(local_rank, bootstrap)
    raise ValueError(f"unknown heap backend {name!r}")
