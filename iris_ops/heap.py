"""The symmetric heap: one buffer of the same size on every rank, mapped by every peer.

`Iris` matches Iris's host API: tensor constructors that allocate on the heap (so their
addresses translate to every peer), rank queries, `get_heap_bases()` for kernels, barrier and
broadcast. Allocation is a bump allocator with 1 KiB alignment; every rank must allocate the
same sequence of sizes so that a tensor sits at the same offset on every rank (the symmetric
heap's one rule).

Also Iris's module-level host helpers: `do_bench` (time a function between barriers, with Iris's
warm-up/repeat/quantiles/return_mode), `memset_tensor` (fill an int32 tensor with a Triton kernel),
and its logging (`logger`, `set_logger_level`, DEBUG/INFO/WARNING/ERROR; `Iris.log`, `log_stats`,
`log_debug` print `[Iris] [rank/num_ranks] message` on the rank that calls them, as Iris does).
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from streamk_pgas.iris_ops.backends import HeapBackend, choose_backend, make_backend
from streamk_pgas.iris_ops.bootstrap import Bootstrap, get_bootstrap, launched_by, timeout_from_env
from streamk_pgas.iris_ops.env import on_gpu, share_gpu
from streamk_pgas.iris_ops.errors import HeapReserveError

ALIGNMENT = 1024

# -- logging, as Iris sets it up: a logger with its own handler, level INFO, lines prefixed with the rank ----------
DEBUG = logging.DEBUG
INFO = logging.INFO
WARNING = logging.WARNING
ERROR = logging.ERROR


class IrisFormatter(logging.Formatter):
    """`[Iris] [rank/num_ranks] message` for records an Iris object logged, `[Iris] message` otherwise."""

    def format(self, record: logging.LogRecord) -> str:
        rank = getattr(record, "iris_rank", None)
        num_ranks = getattr(record, "iris_num_ranks", None)
        prefix = "[Iris]" if rank is None else f"[Iris] [{rank}/{num_ranks}]"
        return f"{prefix} {record.getMessage()}"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time of the call (a redirected or captured one too)."""

    _iris_ops = True

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


logger = logging.getLogger("iris_ops")
logger.setLevel(logging.INFO)
if not any(getattr(h, "_iris_ops", False) for h in logger.handlers):
    _handler = _StderrHandler()
    _handler.setFormatter(IrisFormatter())
    logger.addHandler(_handler)


def set_logger_level(level: int | str) -> None:
    """Set the level of the iris_ops logger (iris_ops.DEBUG, INFO, WARNING or ERROR, or their names)."""
    if isinstance(level, str):
        named = logging.getLevelName(level.upper())
        if not isinstance(named, int):
            raise ValueError(f"set_logger_level: level must be one of DEBUG, INFO, WARNING, ERROR; got {level!r}")
        level = named
    logger.setLevel(level)


class HeapPlacementError(ValueError):
    """A tensor that must live on the symmetric heap does not."""


class Iris:
    """A rank's view of the symmetric heap."""

    def __init__(self, heap_size: int = 1 << 30, backend: str | None = None) -> None:
        if heap_size <= 0:
            raise ValueError(f"heap_size must be positive, got {heap_size}")
        heap_size = math.ceil(heap_size / ALIGNMENT) * ALIGNMENT
        self.backend_name = choose_backend(backend)
        if self.backend_name == "symm":
            from streamk_pgas.iris_ops.backends.torch_symm import symm_problem

            problem = symm_problem()
            if problem:
                raise RuntimeError(problem)
            if launched_by() == "torchrun":
                # torchrun's bootstrap would make a gloo default group; torch symmetric memory gets NCCL's
                from streamk_pgas.iris_ops.backends.torch_symm import init_default_group_from_env

                init_default_group_from_env(timeout_from_env())
        self.bootstrap: Bootstrap = get_bootstrap()
        self.cur_rank = self.bootstrap.rank
        self.num_ranks = self.bootstrap.world_size
        self.comm = getattr(self.bootstrap, "comm", None)  # Iris's MPI communicator (None without mpirun)
        if self.backend_name != "shm":
            n_gpus = torch.cuda.device_count()
            if self.bootstrap.local_size > n_gpus and not share_gpu():
                raise RuntimeError(
                    f"{self.bootstrap.local_size} ranks on this node but only {n_gpus} GPU(s): "
                    "start at most one rank per GPU"
                )
        job_id = self.bootstrap.broadcast(uuid.uuid4().hex[:12] if self.cur_rank == 0 else None)
        self._backend: HeapBackend = make_backend(
            self.backend_name, self.cur_rank, self.bootstrap.local_rank, job_id, bootstrap=self.bootstrap
        )
        self.device = self._backend.device
        self.gpu_id = self.device.index if self.device.type == "cuda" else None
        self.heap_size = heap_size
        self.heap_offset = 0
        self.alignment = ALIGNMENT
        self.memory_pool = self._allocate_everywhere(heap_size)

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

    def _allocate_everywhere(self, heap_size: int) -> torch.Tensor:
        """This rank's heap, or on every rank the same error when any rank could not have its heap: a rank
        that failed alone would leave its peers waiting for its handle. Out of memory (a heap file whose
        space cannot be reserved, a GPU without room) -> HeapReserveError (a MemoryError) with the failing
        rank's line; anything else -> RuntimeError naming the rank (the failing rank re-raises its own)."""
        failure: tuple[bool, str] | None = None
        pool = None
        try:
            pool = self._backend.allocate(heap_size)
        except Exception as exc:
            own = exc
            out_of_memory = isinstance(exc, (MemoryError, getattr(torch, "OutOfMemoryError", MemoryError)))
            failure = (out_of_memory, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        failures = self.bootstrap.allgather(failure)
        failed = [(rank, f) for rank, f in enumerate(failures) if f is not None]
        if not failed:
            return pool
        self._backend.close()  # nobody maps a heap of this world: remove this rank's file / memory now
        if failure is not None:
            if failure[0] and not isinstance(own, HeapReserveError):
                raise HeapReserveError(failure[1]) from own
            raise own
        rank, (out_of_memory, line) = failed[0]
        if out_of_memory:
            raise HeapReserveError(f"rank {rank}: {line}")
        raise RuntimeError(f"rank {rank} could not create its symmetric heap: {line}")

    # -- logging (Iris has both families) ----------------------------------------------------------
    def _log_with_rank(self, level: int, message: str) -> None:
        if logger.isEnabledFor(level):
            logger.log(level, "%s", message, extra={"iris_rank": self.cur_rank, "iris_num_ranks": self.num_ranks})

    def debug(self, message: str) -> None:
        """Log at DEBUG through iris_ops.logger, as `[Iris] [rank/num_ranks] message` (stderr)."""
        self._log_with_rank(logging.DEBUG, message)

    def info(self, message: str) -> None:
        self._log_with_rank(logging.INFO, message)

    def warning(self, message: str) -> None:
        self._log_with_rank(logging.WARNING, message)

    def error(self, message: str) -> None:
        self._log_with_rank(logging.ERROR, message)

    def _print_with_rank(self, message: str) -> None:
        print(f"[Iris] [{self.cur_rank}/{self.num_ranks}] {message}", file=sys.stdout, flush=True)

    def log(self, message: str) -> None:
        """Print `[Iris] [rank/num_ranks] message` on stdout, on the calling rank (on by default, as in Iris;
        silenced when the iris_ops logger's level is above INFO)."""
        if logger.isEnabledFor(logging.INFO):
            self._print_with_rank(message)

    def log_stats(self, message: str) -> None:
        """Like `log`: statistics lines (on by default in Iris)."""
        if logger.isEnabledFor(logging.INFO):
            self._print_with_rank(message)

    def log_debug(self, message: str) -> None:
        """Like `log`, but only printed at DEBUG level (off by default, as in Iris):
        `iris_ops.set_logger_level(iris_ops.DEBUG)` turns it on."""
        if logger.isEnabledFor(logging.DEBUG):
            self._print_with_rank(message)

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

    def barrier(self, stream: Any = None, timeout_s: float | None = None) -> None:
        """Drain this rank's device work (all of it, or only `stream`'s when one is given, as in Iris), then
        meet every rank (bounded wait)."""
        if stream is not None:
            stream.synchronize()
        elif self.device.type == "cuda":
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

    def wall_clock_rate(self, rank: int | None = None) -> int:
        """Ticks per millisecond (kHz) of the timer kernels read with read_timer, on the GPU of `rank` (Iris
        passes the rank as the device; default: this rank's own device)."""
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)
                                 or not 0 <= rank < self.num_ranks):
            raise ValueError(f"wall_clock_rate: rank must be an int in [0, {self.num_ranks}); got {rank!r}")
        hip_gpu = self.backend_name == "hip" or (self.backend_name == "symm" and getattr(torch.version, "hip", None))
        if self.backend_name in ("cuda", "symm") and not hip_gpu:
            return 1_000_000  # %globaltimer counts nanoseconds
        if hip_gpu:
            index = self.device.index if rank is None else rank % max(1, torch.cuda.device_count())
            try:
                from hip import hip

                err, rate = hip.hipDeviceGetAttribute(
                    hip.hipDeviceAttribute_t.hipDeviceAttributeWallClockRate, index
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

    def allocate(self, num_elements: int, dtype: torch.dtype) -> torch.Tensor:
        """A 1-D tensor of `num_elements` x `dtype` on the heap, uninitialised (Iris's public allocator)."""
        if isinstance(num_elements, bool) or not isinstance(num_elements, int) or num_elements < 0:
            raise ValueError(f"allocate: num_elements must be an int >= 0; got {num_elements!r}")
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"allocate: dtype must be a torch.dtype; got {dtype!r}")
        self.debug(f"allocate: num_elements = {num_elements}, dtype = {dtype}")
        return self._allocate(num_elements, dtype)

    def deallocate(self, pointer: Any) -> None:
        """Accepted and ignored, as in Iris: the heap is a bump allocator and frees nothing one at a time
        (`reset_allocator` forgets everything at once)."""
        return None

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

    def parse_size(self, size: Sequence[Any]) -> tuple[tuple[int, ...], int]:
        """(shape, number of elements) of a size given as ints or one (nested) tuple/list, as in Iris."""
        shape = self._parse_size(size)
        return shape, math.prod(shape)

    @staticmethod
    def _check_layout(layout: Any) -> None:
        if layout is not None and layout != torch.strided:
            raise ValueError(f"layout must be torch.strided (heap tensors are dense); got {layout}")

    def _new(self, size: Sequence[Any], dtype: torch.dtype | None, device: Any, out: torch.Tensor | None,
             layout: Any = torch.strided) -> torch.Tensor:
        dtype = dtype or torch.get_default_dtype()
        self._check_device(device)
        self._check_layout(layout)
        shape = self._parse_size(size)
        n = math.prod(shape)
        if out is not None:
            self.require_on_heap(out, "out")
            if out.numel() != n or out.dtype != dtype:
                raise ValueError(f"out has {out.numel()} x {out.dtype}, expected {n} x {dtype}")
            return out.view(shape)
        return self._allocate(n, dtype).view(shape)

    @staticmethod
    def _apply_memory_format(t: torch.Tensor, memory_format: Any, like: torch.Tensor | None = None) -> torch.Tensor:
        """Re-stride a freshly allocated (contiguous) heap tensor to `memory_format`, on the same bytes."""
        if memory_format in (None, torch.contiguous_format):
            return t
        if memory_format == torch.preserve_format:
            if like is None or like.is_contiguous():
                return t
            for fmt in (torch.channels_last, torch.channels_last_3d):
                if like.dim() == (4 if fmt == torch.channels_last else 5) and like.is_contiguous(memory_format=fmt):
                    memory_format = fmt
                    break
            else:
                return t
        wanted = {torch.channels_last: 4, torch.channels_last_3d: 5}.get(memory_format)
        if wanted is None or t.dim() != wanted:
            raise ValueError(
                f"memory_format must be torch.contiguous_format, torch.preserve_format, torch.channels_last (4-D) "
                f"or torch.channels_last_3d (5-D); got {memory_format} for a {t.dim()}-D tensor"
            )
        strides = torch.empty(t.shape, device="meta", memory_format=memory_format).stride()
        return t.as_strided(t.shape, strides)

    def empty(self, *size: Any, out: torch.Tensor | None = None, dtype: torch.dtype | None = None,
              layout: Any = torch.strided, device: Any = None, requires_grad: bool = False,
              pin_memory: bool = False, memory_format: Any = torch.contiguous_format) -> torch.Tensor:
        t = self._new(size, dtype, device, out, layout)
        return self._apply_memory_format(t, memory_format).requires_grad_(requires_grad)

    def zeros(self, *size: Any, out: torch.Tensor | None = None, dtype: torch.dtype | None = None,
              layout: Any = torch.strided, device: Any = None, requires_grad: bool = False) -> torch.Tensor:
        return self._new(size, dtype, device, out, layout).zero_().requires_grad_(requires_grad)

    def ones(self, *size: Any, out: torch.Tensor | None = None, dtype: torch.dtype | None = None,
             layout: Any = torch.strided, device: Any = None, requires_grad: bool = False) -> torch.Tensor:
        return self._new(size, dtype, device, out, layout).fill_(1).requires_grad_(requires_grad)

    def full(self, size: Sequence[int], fill_value: Any, *, out: torch.Tensor | None = None,
             dtype: torch.dtype | None = None, layout: Any = torch.strided, device: Any = None,
             requires_grad: bool = False) -> torch.Tensor:
        if dtype is None:
            dtype = torch.tensor(fill_value).dtype if not isinstance(fill_value, float) else None
        size = size if isinstance(size, (tuple, list, torch.Size)) else (size,)
        return self._new(size, dtype, device, out, layout).fill_(fill_value).requires_grad_(requires_grad)

    def zeros_like(self, input: torch.Tensor, *, dtype: torch.dtype | None = None, layout: Any = None,
                   device: Any = None, requires_grad: bool = False,
                   memory_format: Any = torch.preserve_format) -> torch.Tensor:
        t = self.zeros(*input.shape, dtype=dtype or input.dtype, device=device, layout=layout)
        return self._apply_memory_format(t, memory_format, like=input).requires_grad_(requires_grad)

    def randn(self, *size: Any, generator: torch.Generator | None = None, out: torch.Tensor | None = None,
              dtype: torch.dtype | None = None, layout: Any = torch.strided, device: Any = None,
              requires_grad: bool = False, pin_memory: bool = False) -> torch.Tensor:
        t = self._new(size, dtype, device, out, layout)
        t.copy_(torch.randn(t.shape, generator=generator, dtype=t.dtype, device=self._gen_device(generator)))
        return t.requires_grad_(requires_grad)

    def uniform(self, size: Any, low: float = 0.0, high: float = 1.0, dtype: torch.dtype = torch.float32
                ) -> torch.Tensor:
        size = size if isinstance(size, (tuple, list, torch.Size)) else (size,)
        t = self._new(size, dtype, None, None)
        return t.uniform_(low, high)

    def rand(self, *size: Any, generator: torch.Generator | None = None, out: torch.Tensor | None = None,
             dtype: torch.dtype | None = None, layout: Any = torch.strided, device: Any = None,
             requires_grad: bool = False, pin_memory: bool = False) -> torch.Tensor:
        t = self._new(size, dtype, device, out, layout)
        t.copy_(torch.rand(t.shape, generator=generator, dtype=t.dtype, device=self._gen_device(generator)))
        return t.requires_grad_(requires_grad)

    def randint(self, *args: Any, generator: torch.Generator | None = None, out: torch.Tensor | None = None,
                dtype: torch.dtype | None = None, layout: Any = torch.strided, device: Any = None,
                requires_grad: bool = False) -> torch.Tensor:
        """randint(high, size) or randint(low, high, size), like torch.randint (int64 unless dtype is given)."""
        if len(args) == 2:
            low, (high, size) = 0, args
        elif len(args) == 3:
            low, high, size = args
        else:
            raise TypeError(f"randint(high, size) or randint(low, high, size); got {len(args)} positional arguments")
        size = size if isinstance(size, (tuple, list, torch.Size)) else (size,)
        t = self._new(size, dtype or torch.int64, device, out, layout)
        t.copy_(torch.randint(low, high, t.shape, generator=generator, dtype=t.dtype,
                              device=self._gen_device(generator)))
        return t.requires_grad_(requires_grad)

    def arange(self, start: Any = 0, end: Any = None, step: Any = 1, *, out: torch.Tensor | None = None,
               dtype: torch.dtype | None = None, layout: Any = torch.strided, device: Any = None,
               requires_grad: bool = False) -> torch.Tensor:
        if end is None:
            start, end = 0, start
        if step == 0:
            raise ValueError("arange: step must be non-zero")
        ref = torch.arange(start, end, step, dtype=dtype)
        t = self._new(ref.shape, ref.dtype, device, out, layout)
        t.copy_(ref)
        return t.requires_grad_(requires_grad)

    def linspace(self, start: Any, end: Any, steps: Any, out: torch.Tensor | None = None,
                 dtype: torch.dtype | None = None, layout: Any = torch.strided, device: Any = None,
                 requires_grad: bool = False) -> torch.Tensor:
        """`steps` points from start to end inclusive; steps may also be given as (n,) as Iris allows."""
        if isinstance(steps, (tuple, list, torch.Size)):
            steps = math.prod(self._parse_size(steps))
        ref = torch.linspace(start, end, int(steps), dtype=dtype)
        t = self._new(ref.shape, ref.dtype, device, out, layout)
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
    """Create this rank's symmetric heap; every rank must call it with the same heap_size. If any rank cannot
    have its heap (no room in the shm folder or on the GPU), every rank raises HeapReserveError (a MemoryError,
    one line naming the bytes asked for and free) and none keeps a heap."""
    return Iris(heap_size, backend=backend)


# -- Iris's module-level host helpers ---------------------------------------------------------------------------------
RETURN_MODES = ("mean", "median", "min", "max", "all")
_L2_FLUSH_BYTES = 256 << 20  # what do_bench zeroes between runs on a GPU, larger than any GPU's L2
_host_clock: Callable[[], float] = time.perf_counter  # seconds; the CPU path times with it (tests replace it)


def _quantiles(samples: Sequence[float], qs: Sequence[float]) -> list[float]:
    """Linear-interpolation quantiles (numpy's default 'linear' method) of `samples`."""
    ordered = sorted(samples)
    n = len(ordered)
    out = []
    for q in qs:
        if not 0 <= q <= 1:
            raise ValueError(f"do_bench: quantiles must lie in [0, 1]; got {q!r}")
        point = q * (n - 1)
        lo, hi = math.floor(point), math.ceil(point)
        out.append(ordered[lo] + (point - lo) * (ordered[hi] - ordered[lo]))
    return out


def _summarize(times: list[float], quantiles: Sequence[float] | None, return_mode: str) -> float | list[float]:
    if quantiles is not None:
        got = _quantiles(times, quantiles)
        return got[0] if len(got) == 1 else got
    if return_mode == "all":
        return times
    if return_mode == "min":
        return min(times)
    if return_mode == "max":
        return max(times)
    if return_mode == "median":
        return statistics.median(times)
    return statistics.mean(times)


def _timing_on_gpu() -> bool:
    return on_gpu()


def do_bench(fn: Callable[[], Any], barrier_fn: Callable[[], Any] = lambda: None,
             preamble_fn: Callable[[], Any] = lambda: None, n_warmup: int = 25, n_repeat: int = 100,
             quantiles: Sequence[float] | None = None, return_mode: str = "mean") -> float | list[float]:
    """Milliseconds per call of `fn`, as Iris's do_bench measures them.

    One untimed call first (barrier_fn, preamble_fn, fn, barrier_fn); then n_warmup untimed and n_repeat
    timed runs, each as barrier_fn, preamble_fn, L2 flush, barrier_fn, fn (only fn is inside the timing);
    then barrier_fn once more. With `quantiles` (a list of numbers in [0, 1]) the result is those quantiles
    of the n_repeat times (linear interpolation; one quantile -> a float); otherwise `return_mode`: 'mean'
    (default), 'median', 'min', 'max', or 'all' (the list of times). On a GPU the times come from CUDA events
    on the current stream and a 256 MiB buffer is zeroed as the flush; on the CPU (Triton's interpreter)
    from the host clock around fn, with no flush.
    """
    if return_mode not in RETURN_MODES:
        raise ValueError(f"do_bench: return_mode must be one of {', '.join(RETURN_MODES)}; got {return_mode!r}")
    for name, value, least in (("n_warmup", n_warmup, 0), ("n_repeat", n_repeat, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"do_bench: {name} must be an int >= {least}; got {value!r}")
    if quantiles is not None:
        quantiles = list(quantiles)
        if not quantiles:
            raise ValueError("do_bench: quantiles must be None or a non-empty list of numbers in [0, 1]")
        _quantiles([0.0], quantiles)  # refuse a bad quantile before running anything

    barrier_fn()
    preamble_fn()
    fn()
    barrier_fn()

    on_gpu = _timing_on_gpu()
    cache = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda") if on_gpu else None

    def flush() -> None:
        if cache is not None:
            cache.zero_()

    for _ in range(n_warmup):
        barrier_fn()
        preamble_fn()
        flush()
        barrier_fn()
        fn()

    times: list[float] = []
    if on_gpu:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for i in range(n_repeat):
        barrier_fn()
        preamble_fn()
        flush()
        barrier_fn()
        if on_gpu:
            starts[i].record()
            fn()
            ends[i].record()
        else:
            t0 = _host_clock()
            fn()
            times.append((_host_clock() - t0) * 1e3)
    barrier_fn()
    if on_gpu:
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return _summarize(times, quantiles, return_mode)


@triton.jit
def _memset_kernel(ptr, value, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(ptr + offsets, tl.full([BLOCK_SIZE], value, dtype=tl.int32), mask=offsets < n_elements)


def memset_tensor(tensor: torch.Tensor, value: int) -> None:
    """Set every element of a contiguous int32 tensor (on the heap or not) to `value`, with a Triton kernel."""
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.int32 or not tensor.is_contiguous():
        what = f"{tensor.dtype}, contiguous={tensor.is_contiguous()}" if isinstance(tensor, torch.Tensor) else (
            type(tensor).__name__)
        raise ValueError(f"memset_tensor: tensor must be a contiguous torch.int32 tensor; got {what}")
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"memset_tensor: value must be an int that fits in int32; got {value!r}")
    n = tensor.numel()
    if n == 0:
        return
    block = 1024
    _memset_kernel[(triton.cdiv(n, block),)](tensor, value, n, BLOCK_SIZE=block)
