"""Heap backend on torch's symmetric memory (`IRIS_OPS_BACKEND=symm`, never chosen automatically).

The heap is one `torch.distributed._symmetric_memory.empty(heap_size, dtype=uint8)` allocation per rank,
made symmetric with `rendezvous(heap, world_group)`; every peer's heap base is read from the handle's
`buffer_ptrs` (plus the heap's offset inside its allocation, should torch's pool place it at one). The
same bytes are then addressed by iris_ops kernels (through get_heap_bases()) and, for tensors torch
accepts, by torch's symm_mem ops (one_shot_all_reduce, ...).

Symmetric memory needs torch.distributed: if no default process group exists this backend starts one
(cpu:gloo,cuda:nccl; NCCL communicators are created lazily, only if a collective is ever called):
- under mpirun, rank 0 opens a TCPStore on a free port and the address reaches the others through
  the MPI bootstrap (a bounded broadcast);
- under torchrun, the env:// rendezvous torchrun set up (done by the heap before its bootstrap runs,
  so that the bootstrap does not make a gloo-only default group first);
- in a plain process, a world of one on a private TCPStore.
An existing default group is used as it is, and must span the same ranks as the bootstrap's world.
Every wait is bounded by IRIS_OPS_TIMEOUT_S (process-group start-up and the store-based rendezvous).

torch (and CUDA) are touched only when this backend is chosen, so the CPU path never needs them.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import warnings
from typing import Any

import torch

from streamk_pgas.iris_ops.bootstrap import timeout_from_env
from streamk_pgas.iris_ops.env import interpreted

NEEDS = "IRIS_OPS_BACKEND=symm needs a CUDA GPU with torch symmetric memory"


def symm_problem() -> str | None:
    """Why this process cannot use the symm backend (one line, starting with NEEDS), or None."""
    if interpreted():
        return f"{NEEDS}; TRITON_INTERPRET=1 runs kernels on the CPU (use IRIS_OPS_BACKEND=shm there)"
    if not torch.cuda.is_available():
        return f"{NEEDS}; torch {torch.__version__} sees no GPU"
    import torch.distributed as dist

    if not dist.is_available():
        return f"{NEEDS}; torch {torch.__version__} was built without torch.distributed"
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError as exc:
        return f"{NEEDS}; torch {torch.__version__} has no torch.distributed._symmetric_memory ({exc})"
    if not (hasattr(symm_mem, "empty") and hasattr(symm_mem, "rendezvous")):
        return f"{NEEDS}; torch {torch.__version__}'s _symmetric_memory lacks empty/rendezvous"
    return None


def _timedelta(timeout_s: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=timeout_s)


PG_BACKEND = "cpu:gloo,cuda:nccl"


def init_default_group_from_env(timeout_s: float) -> None:
    """Under torchrun: start the default process group from torchrun's env:// variables (if none exists)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group(PG_BACKEND, init_method="env://", timeout=_timedelta(timeout_s))


def ensure_world_group(bootstrap: Any, timeout_s: float | None = None) -> Any:
    """The default (world) process group, started from the bootstrap's world if nobody has started one."""
    import torch.distributed as dist

    timeout_s = timeout_from_env() if timeout_s is None else timeout_s
    rank, world = bootstrap.rank, bootstrap.world_size
    if not dist.is_initialized():
        timeout = _timedelta(timeout_s)
        if bootstrap.launcher == "torchrun":
            init_default_group_from_env(timeout_s)
        else:
            store = None
            address = None
            if rank == 0:
                host = "127.0.0.1" if bootstrap.local_size == world else socket.gethostbyname(socket.gethostname())
                store = dist.TCPStore(host, 0, world, is_master=True, timeout=timeout, wait_for_workers=False)
                address = (host, store.port)
            host, port = bootstrap.broadcast(address, root=0, timeout_s=timeout_s)
            if store is None:
                store = dist.TCPStore(host, port, world, is_master=False, timeout=timeout)
            dist.init_process_group(PG_BACKEND, store=store, rank=rank, world_size=world, timeout=timeout)
    if dist.get_world_size() != world or dist.get_rank() != rank:
        raise RuntimeError(
            f"IRIS_OPS_BACKEND=symm: the default process group is rank {dist.get_rank()} of {dist.get_world_size()}, "
            f"but the launcher says rank {rank} of {world}; start it over the whole job or not at all"
        )
    return dist.group.WORLD


def _rendezvous(symm_mem: Any, tensor: torch.Tensor, group: Any) -> Any:
    """rendezvous on the group, across torch versions: recent ones know every group; older ones (<= 2.7)
    first need enable_symm_mem_for_group (deprecated, and warning, since)."""
    name = group.group_name
    try:
        return symm_mem.rendezvous(tensor, name)
    except RuntimeError as exc:
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        if enable is None or "group" not in str(exc).lower():
            raise
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            enable(name)
        return symm_mem.rendezvous(tensor, name)


def peer_heap_bases(handle: Any, heap: torch.Tensor, rank: int, world: int) -> list[int]:
    """Where each rank's heap is mapped in this process (rank `rank` of `world`), from a rendezvous handle
    of `heap`."""
    ptrs = getattr(handle, "buffer_ptrs", None)
    if ptrs is None:  # older handles: one view per peer
        return [int(handle.get_buffer(r, (heap.numel(),), torch.uint8, 0).data_ptr()) for r in range(world)]
    ptrs = [int(p) for p in ptrs]
    if len(ptrs) != world:
        raise RuntimeError(f"torch symmetric memory handle has {len(ptrs)} peer buffers, expected {world}")
    offset = heap.data_ptr() - ptrs[rank]  # 0 unless torch's pool put the heap inside a larger buffer
    size = getattr(handle, "buffer_size", None)
    if offset < 0 or (size is not None and offset + heap.numel() > int(size)):
        raise RuntimeError(
            f"the heap at {heap.data_ptr():#x} (+{heap.numel()} B) is not inside this rank's symmetric buffer "
            f"at {ptrs[rank]:#x} (+{size} B)"
        )
    return [p + offset for p in ptrs]


class TorchSymmBackend:
    name = "symm"

    def __init__(self, local_rank: int, bootstrap: Any) -> None:
        problem = symm_problem()
        if problem:
            raise RuntimeError(problem)
        from streamk_pgas.iris_ops.backends.cuda_ipc import shared_gpu_index

        index = shared_gpu_index(local_rank)
        torch.cuda.set_device(index)
        self.device = torch.device("cuda", index)
        self.rank = bootstrap.rank
        self.world_size = bootstrap.world_size
        self.group = ensure_world_group(bootstrap)
        self.handle: Any = None
        self._heap: torch.Tensor | None = None
        self._bases: list[int] = []

    @property
    def group_name(self) -> str:
        """The process group's name, as torch.ops.symm_mem ops take it."""
        return self.group.group_name

    def allocate(self, heap_size: int) -> torch.Tensor:
        import torch.distributed._symmetric_memory as symm_mem

        self._heap = symm_mem.empty(heap_size, dtype=torch.uint8, device=self.device)
        self.handle = _rendezvous(symm_mem, self._heap, self.group)
        self._bases = peer_heap_bases(self.handle, self._heap, self.rank, self.world_size)
        return self._heap

    def export(self) -> Any:
        return None  # rendezvous already exchanged everything: peers' bases come from the handle

    def open(self, handle: Any, peer: int) -> int:
        return self._bases[peer]

    def after_all_mapped(self) -> None:
        return None

    def close(self) -> None:
        # torch unmaps the peers' buffers when the handle and the allocation are released
        with contextlib.suppress(Exception):
            torch.cuda.synchronize(self.device)
        self.handle = None
        self._bases = []
