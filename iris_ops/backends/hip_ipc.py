"""AMD backend: the heap is device memory shared through HIP IPC handles (hip-python): ipc.IpcBackend with the HIP
calls.

It has not been run on an AMD GPU in this project yet (no AMD machine was available); the calls are hip-python's
names for the CUDA ones.
"""

from __future__ import annotations

from typing import Any

from streamk_pgas.iris_ops.backends.ipc import IpcBackend, check


def _hip() -> Any:
    try:
        from hip import hip
    except ImportError as exc:
        raise ImportError("the HIP IPC heap backend needs hip-python: pip install 'streamk-pgas[hip]'") from exc
    return hip


class HipIpcBackend(IpcBackend):
    name = "hip"

    def __init__(self, local_rank: int) -> None:
        self.hip = _hip()
        super().__init__(local_rank)

    def _allocation_base(self, ptr: int) -> Any:
        base, _size = check(self.hip.hipMemGetAddressRange(ptr), "hipMemGetAddressRange")
        return base

    def _ipc_handle(self, ptr: int) -> Any:
        return check(self.hip.hipIpcGetMemHandle(ptr), "hipIpcGetMemHandle")

    def _open_handle(self, reserved: bytes) -> Any:
        h = self.hip.hipIpcMemHandle_t()
        h.reserved = reserved
        return check(self.hip.hipIpcOpenMemHandle(h, self.hip.hipIpcMemLazyEnablePeerAccess), "hipIpcOpenMemHandle")

    def _close_handle(self, base: Any) -> None:
        self.hip.hipIpcCloseMemHandle(base)
