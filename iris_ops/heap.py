"""The symmetric heap: one buffer of the same size on every rank, mapped by every peer.

`Iris` matches Iris's host API: tensor constructors that allocate on the heap (so their
addresses translate to every peer), rank queries, `get_heap_bases()` for kernels, barrier and
broadcast. Allocation is a bump allocator with 1 KiB alignment; every rank must allocate the
same sequence of sizes so that a tensor sits at the same offset on every rank (the symmetric
heap's one rule).
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import Sequence
from typing import Any

import torch

from iris_ops.backends import HeapBackend, choose_backend, make_backend
from iris_ops.bootstrap import Bootstrap, get_bootstrap

ALIGNMENT = 1024
logger = logging.getLogger("iris_ops")


class HeapPlacementError(ValueError):
    """A tensor that must live on the symmetric heap does not."""


class Iris:
    """A rank's view of the symmetric heap."""

    def __init__(self, heap_size: int = 1 << 30, backend: str | None = None) -> None:
        if heap_size <= 0:
            raise ValueError(f"heap_size must be positive, got {heap_size}")
        heap_size = math.ceil(heap_size / ALIGNMENT) * ALIGNMENT
        self.bootstrap: Bootstrap = get_bootstrap()
        self.cur_rank = self.bootstrap.rank
        self.num_ranks = self.bootstrap.world_size
        self.backend_name = choose_backend(backend)
        if self.backend_name != "shm":
            n_gpus = torch.cuda.device_count()
            if self.bootstrap.local_size > n_gpus and os.environ.get("STREAMK_PGAS_SHARE_GPU") != "1":
                raise RuntimeError(
                    f"{self.bootstrap.local_size} ranks on this node but only {n_gpus} GPU(s): "
                    "start at most one rank per GPU"
                )
        job_id = self.bootstrap.broadcast(uuid.uuid4().hex[:12] if self.cur_rank == 0 else None)
        self._backend: HeapBackend = make_backend(
            self.backend_name, self.cur_rank, self.bootstrap.local_rank, job_id
        )
        self.device = self._backend.device
        self.gpu_id = self.device.index if self.device.type == "cuda" else None
        self.heap_size = heap_size
        self.heap_offset = 0
        self.alignment = ALIGNMENT
        self.memory_pool = self._backend.allocate(heap_size)

        handles = self.bootstrap.allgather(self._backend.export())
        bases = []
        for peer, handle in enumerate(handles):
            bases.append(self.memory_pool.data_ptr() if peer == self.cur_rank else self._backend.open(handle, peer))
        self.bootstrap.barrier()
        self._backend.after_all_mapped()
        for peer, base in enumerate(bases):
            if (base - bases[0]) % ALIGNMENT:
                raise RuntimeError(f"heap of rank {peer} is mapped at {base:#x}, not {ALIGNMENT}-byte aligned")
        self._heap_bases_host = list(bases)
        self.heap_bases = torch.tensor(bases, dtype=torch.int64, device=self.device)
        self.debug(f"heap of {heap_size} B on {self.backend_name}; bases {[hex(b) for b in bases]}")

    # -- logging (Iris has these) --------------------------------------------------------------
    def debug(self, message: str) -> None:
        logger.debug("[rank %d/%d] %s", self.cur_rank, self.num_ranks, message)

    def info(self, message: str) -> None:
        logger.info("[rank %d/%d] %s", self.cur_rank, self.num_ranks, message)

    def warning(self, message: str) -> None:
        logger.warning("[rank %d/%d] %s", self.cur_rank, self.num_ranks, message)

    def error(self, message: str) -> None:
        logger.error("[rank %d/%d] %s", self.cur_rank, self.num_ranks, message)

    # -- world ------------------------------------------------------------------------------------
    def get_rank(self) -> int:
        return self.cur_rank

    def get_num_ranks(self) -> int:
        return self.num_ranks

    def get_heap_bases(self) -> torch.Tensor:
        """int64 tensor on the heap's device: heap_bases[r] is where rank r's heap is mapped here."""
        return self.heap_bases

    def get_device(self) -> torch.device:
        return self.device

    def barrier(self, timeout_s: float | None = None) -> None:
        """Drain this rank's device work, then meet every rank (bounded wait)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.bootstrap.barrier(timeout_s)

    def broadcast(self, value: Any, source_rank: int = 0) -> Any:
        """Send a picklable value (a scalar, a small array) from source_rank to every rank."""
        return self.bootstrap.broadcast(value, root=source_rank)

    def broadcast_tensor(self, value: torch.Tensor, source_rank: int = 0) -> torch.Tensor:
        host = self.bootstrap.broadcast(value.cpu() if self.cur_rank == source_rank else None, root=source_rank)
        return host.to(self.device)

    def allgather(self, value: Any) -> list[Any]:
        return self.bootstrap.allgather(value)

    def get_cu_count(self) -> int:
        """Compute units / SMs of this rank's device (CPU cores on the shm backend)."""
        if self.device.type == "cuda":
            return torch.cuda.get_device_properties(self.device).multi_processor_count
        return os.cpu_count() or 1

    def wall_clock_rate(self) -> int:
        """Ticks per millisecond (kHz) of the timer kernels read with read_timer."""
        if self.backend_name == "cuda":
            return 1_000_000  # %globaltimer counts nanoseconds
        if self.backend_name == "hip":
            try:
                from hip import hip

                err, rate = hip.hipDeviceGetAttribute(
                    hip.hipDeviceAttribute_t.hipDeviceAttributeWallClockRate, self.device.index
                )
                if int(err) == 0:
                    return int(rate)
            except ImportError:
                pass
            return 100_000  # s_memrealtime runs at 100 MHz on CDNA GPUs
        return 1  # the interpreter's logical clock counts events

    get_wall_clock_rate = wall_clock_rate

    # -- allocation ---------------------------------------------------------------------------------
    @property
    def free_bytes(self) -> int:
        return self.heap_size - self.heap_offset

    def _allocate(self, num_elements: int, dtype: torch.dtype) -> torch.Tensor:
        element_size = torch.empty((), dtype=dtype).element_size()
        nbytes = num_elements * element_size
        aligned = max(ALIGNMENT, math.ceil(nbytes / ALIGNMENT) * ALIGNMENT)
        if self.heap_offset + aligned > self.heap_size:
            raise MemoryError(
                f"symmetric heap exhausted: requested {nbytes} B ({num_elements} x {dtype}), "
                f"free {self.free_bytes} B of {self.heap_size} B; raise heap_size"
            )
        start = self.heap_offset
        self.heap_offset += aligned
        return self.memory_pool[start : start + nbytes].view(dtype)

    def reset_allocator(self) -> None:
        """Forget every allocation (all ranks must do it together); existing tensors become invalid."""
        self.heap_offset = 0

    def _check_device(self, device: Any) -> None:
        if device is None:
            return
        dev = torch.device(device)
        if dev.type != self.device.type or (dev.index is not None and dev.index != self.device.index):
            raise ValueError(f"device {dev} is not this heap's device {self.device}")

    @staticmethod
    def _parse_size(size: Sequence[Any]) -> tuple[int, ...]:
        while len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
            size = size[0]
        return tuple(int(s) for s in size)

    def _new(self, size: Sequence[Any], dtype: torch.dtype | None, device: Any, out: torch.Tensor | None):
        dtype = dtype or torch.get_default_dtype()
        self._check_device(device)
        shape = self._parse_size(size)
        n = math.prod(shape)
        if out is not None:
            self.require_on_heap(out, "out")
            if out.numel() != n or out.dtype != dtype:
                raise ValueError(f"out has {out.numel()} x {out.dtype}, expected {n} x {dtype}")
            return out.view(shape)
        return self._allocate(n, dtype).view(shape)

    def empty(self, *size: Any, out=None, dtype=None, layout=torch.strided, device=None,
              requires_grad: bool = False) -> torch.Tensor:
        return self._new(size, dtype, device, out).requires_grad_(requires_grad)

    def zeros(self, *size: Any, out=None, dtype=None, layout=torch.strided, device=None,
              requires_grad: bool = False) -> torch.Tensor:
        return self._new(size, dtype, device, out).zero_().requires_grad_(requires_grad)

    def ones(self, *size: Any, out=None, dtype=None, layout=torch.strided, device=None,
             requires_grad: bool = False) -> torch.Tensor:
        return self._new(size, dtype, device, out).fill_(1).requires_grad_(requires_grad)

    def full(self, size: Sequence[int], fill_value: Any, *, out=None, dtype=None, layout=torch.strided,
             device=None, requires_grad: bool = False) -> torch.Tensor:
        if dtype is None:
            dtype = torch.tensor(fill_value).dtype if not isinstance(fill_value, float) else None
        return self._new(size, dtype, device, out).fill_(fill_value).requires_grad_(requires_grad)

    def zeros_like(self, input: torch.Tensor, *, dtype=None, layout=None, device=None,
                   requires_grad: bool = False, memory_format=torch.preserve_format) -> torch.Tensor:
        return self.zeros(*input.shape, dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)

    def randn(self, *size: Any, generator=None, out=None, dtype=None, layout=torch.strided, device=None,
              requires_grad: bool = False) -> torch.Tensor:
        t = self._new(size, dtype, device, out)
        t.copy_(torch.randn(t.shape, generator=generator, dtype=t.dtype, device=self._gen_device(generator)))
        return t.requires_grad_(requires_grad)

    def uniform(self, size: Any, low: float = 0.0, high: float = 1.0, dtype=torch.float32) -> torch.Tensor:
        size = size if isinstance(size, (tuple, list, torch.Size)) else (size,)
        t = self._new(size, dtype, None, None)
        return t.uniform_(low, high)

    def rand(self, *size: Any, generator=None, out=None, dtype=None, layout=torch.strided, device=None,
             requires_grad: bool = False) -> torch.Tensor:
        t = self._new(size, dtype, device, out)
        t.copy_(torch.rand(t.shape, generator=generator, dtype=t.dtype, device=self._gen_device(generator)))
        return t.requires_grad_(requires_grad)

    def randint(self, *args: Any, generator=None, out=None, dtype=None, layout=torch.strided, device=None,
                requires_grad: bool = False) -> torch.Tensor:
        """randint(high, size) or randint(low, high, size), like torch.randint."""
        if len(args) == 2:
            low, (high, size) = 0, args
        elif len(args) == 3:
            low, high, size = args
        else:
            raise TypeError("randint(high, size) or randint(low, high, size)")
        t = self._new(size, dtype or torch.int64, device, out)
        t.copy_(torch.randint(low, high, t.shape, generator=generator, dtype=t.dtype,
                              device=self._gen_device(generator)))
        return t.requires_grad_(requires_grad)

    def arange(self, start: Any = 0, end: Any = None, step: Any = 1, *, out=None, dtype=None,
               layout=torch.strided, device=None, requires_grad: bool = False) -> torch.Tensor:
        if end is None:
            start, end = 0, start
        ref = torch.arange(start, end, step, dtype=dtype)
        t = self._new(ref.shape, ref.dtype, device, out)
        t.copy_(ref)
        return t.requires_grad_(requires_grad)

    def linspace(self, start: float, end: float, steps: int, out=None, dtype=None, layout=torch.strided,
                 device=None, requires_grad: bool = False) -> torch.Tensor:
        ref = torch.linspace(start, end, steps, dtype=dtype)
        t = self._new(ref.shape, ref.dtype, device, out)
        t.copy_(ref)
        return t.requires_grad_(requires_grad)

    def _gen_device(self, generator: Any) -> torch.device:
        return generator.device if generator is not None else self.device

    # -- placement checks -------------------------------------------------------------------------
    def on_heap(self, tensor: torch.Tensor) -> bool:
        if tensor.numel() == 0:
            return True
        base = self.memory_pool.data_ptr()
        start = tensor.data_ptr()
        end = start + (tensor.numel() - 1) * tensor.element_size()  # contiguous extent is enough
        return tensor.device == self.device and base <= start and end < base + self.heap_size

    def require_on_heap(self, tensor: torch.Tensor, name: str = "tensor") -> None:
        """Raise if `tensor` is not on this symmetric heap (peers could not translate its address)."""
        if not self.on_heap(tensor):
            raise HeapPlacementError(
                f"{name} (at {tensor.data_ptr():#x} on {tensor.device}) is not on the symmetric heap "
                f"[{self.memory_pool.data_ptr():#x}, +{self.heap_size}) on {self.device}: allocate it with "
                "the Iris object's zeros/empty/randn/..."
            )

    def close(self) -> None:
        self._backend.close()


def iris(heap_size: int = 1 << 30, backend: str | None = None) -> Iris:
    """Create this rank's symmetric heap; every rank must call it with the same heap_size."""
    return Iris(heap_size, backend=backend)
