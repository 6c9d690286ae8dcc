"""Communication that costs no SMs: the copy engine moves finished data while the GEMM keeps every SM.

The GEMM counts its finished tiles per band of tile rows (`store_and_count`: +1 per tile on its band's
word, release at system scope). A communication stream then runs a *copy schedule*, a fixed list of
stream-ordered operations built once per op:

    WaitGeq(word, n)     the stream waits until the word >= n (cuStreamWaitValue32, GEQ)
    Copy2D(dst, src)     a 2-D copy of rows with their own pitches (cuMemcpy2DAsync; peer memory is
                         reached through the heap's mapping, so the copy engines move it over NVLink)
    Zero32(words)        the words back to 0 (cuMemsetD32Async), so the next step waits for the same
                         counts: no value changes between steps, and the schedule can be captured in a
                         CUDA graph and replayed
    Launch(kernel)       a one-program kernel of the step protocol (overlap.kernels: ce_start / ce_finish)

Nothing in a schedule can wait forever: a WaitGeq waits only for words of this rank's own GEMM, which
counts every tile exactly once even when one of its own bounded waits gives up; every wait on a peer is
in a kernel, bounded by max_spins like every other wait of the project.

On the CPU backend the same schedule runs on the host: by the time the host reaches it, the interpreter
has run the GEMM, so each WaitGeq is a bounded poll that finds its count, and each copy is a row-by-row
`memmove` between the heaps, which every rank maps into its address space.
"""

from __future__ import annotations

import ctypes
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import triton
import triton.language as tl


@triton.jit
def store_and_count(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """EPILOGUE of the copy-engine mode: masked store of the tile, then +1 on its band's count (release at GPU
    scope: the count is read by this GPU's stream wait and the band by its copy engine, both from this GPU's memory
    through its L2, where a GPU-scope release has put the tile before the count; a system-scope fence per tile
    would stall each program for microseconds). TILE_FLAGS[pid_m] holds the index, in TILE_FLAGS, of the count of
    tile row pid_m's band (a map written once by the op; see band_counts)."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)
    tl.debug_barrier()
    pid_m = tl.min(rm, axis=0) // rm.shape[0]
    word = tl.load(TILE_FLAGS + pid_m)
    tl.atomic_add(TILE_FLAGS + word, 1, sem="release", scope="gpu")


@triton.jit
def rank_order_slots(OWN, own_offs, RECV, stride_slot, recv_offs, mask, rank, WORLD: tl.constexpr):
    """The sum over ranks s, in rank order, of slot s: OWN[own_offs] (this rank's rows of its partial) for s = rank,
    RECV[s * stride_slot + recv_offs] (rank s's rows, copied here) otherwise; accumulated in fp32 (int32 for integer
    data) from slot 0, the arithmetic of the SM modes' rank-order sum (comm_loop.rank_order_sum): from the same
    partials, the same bits. Returned unrounded."""
    acc_type: tl.constexpr = tl.int32 if OWN.dtype.element_ty.is_int() else tl.float32
    total = tl.zeros(mask.shape, dtype=acc_type)  # replaced by slot 0 (the loop unrolls)
    for s in tl.static_range(WORLD):
        if s == rank:
            x = tl.load(OWN + own_offs, mask=mask, other=0)
        else:
            x = tl.load(RECV + s * stride_slot + recv_offs, mask=mask, other=0)
        if s == 0:
            total = x.to(acc_type)
        else:
            total += x.to(acc_type)
    return total


@triton.jit
def sum_slots_kernel(C, OWN, RECV, rows, n, stride_c, stride_own, stride_slot, stride_recv, rank,
                     WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """C = the rank-order sum of this rank's rows of its partial (OWN) and the other ranks' slots of RECV
    (rank_order_slots), rounded once. One pass: W reads and one write of a rows x n block (n: the row padded where
    every buffer holds it, so the masks keep whole vectors; overlap.copy_steps.reduce_rows_post)."""
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(n, BLOCK_N)
    rm = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < rows) & (rn[None, :] < n)
    total = rank_order_slots(OWN, rm[:, None] * stride_own + rn[None, :], RECV, stride_slot,
                             rm[:, None] * stride_recv + rn[None, :], mask, rank, WORLD)
    tl.store(C + rm[:, None] * stride_c + rn[None, :], total.to(C.dtype.element_ty), mask=mask)


# ---- the operations of a schedule ---------------------------------------------------------------------


@dataclass(frozen=True)
class WaitGeq:
    addr: int  # an int32 word in device memory
    value: int


@dataclass(frozen=True)
class Copy2D:
    dst: int
    dst_pitch: int  # bytes
    src: int
    src_pitch: int
    width: int  # bytes per row
    rows: int


@dataclass(frozen=True)
class Zero32:
    addr: int
    count: int  # int32 words


@dataclass(frozen=True)
class Launch:
    launch: Any  # a stream_k.launch.BoundLaunch


Op = WaitGeq | Copy2D | Zero32 | Launch


def rows_copy(dst: Any, src: Any, dst_addr: int | None = None, src_addr: int | None = None) -> Copy2D:
    """A Copy2D of the 2-D tensor view `src` into `dst` (same shape, unit column stride); `dst_addr` / `src_addr`
    replace dst's / src's address (the same buffer on a peer's heap: a push / a pull)."""
    assert tuple(dst.shape) == tuple(src.shape) and dst.stride(1) == 1 and src.stride(1) == 1
    elem = src.element_size()
    return Copy2D(dst.data_ptr() if dst_addr is None else dst_addr, dst.stride(0) * elem,
                  src.data_ptr() if src_addr is None else src_addr, src.stride(0) * elem, src.shape[1] * elem,
                  src.shape[0])


# ---- engines: who carries the operations out -------------------------------------------------------------


class HostEngine:
    """The CPU backend's engine: every operation done by the host, at once (the kernels have already run)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    def compile(self, op: Op) -> Callable[[Any], None]:
        if isinstance(op, WaitGeq):
            word = ctypes.c_int32.from_address(op.addr)
            return lambda stream: self._wait(word, op)
        if isinstance(op, Copy2D):
            return lambda stream: _host_copy2d(op)
        if isinstance(op, Zero32):
            return lambda stream: ctypes.memset(op.addr, 0, 4 * op.count)
        return lambda stream: op.launch(stream)

    def _wait(self, word: ctypes.c_int32, op: WaitGeq) -> None:
        deadline = time.monotonic() + self.timeout_s
        while word.value < op.value:
            if time.monotonic() > deadline:
                raise TimeoutError(f"copy schedule: a tile-row count stayed at {word.value} < {op.value} for "
                                   f"{self.timeout_s:g} s")
            time.sleep(1e-4)


def _host_copy2d(op: Copy2D) -> None:
    if op.dst_pitch == op.src_pitch == op.width:
        ctypes.memmove(op.dst, op.src, op.width * op.rows)
        return
    for i in range(op.rows):
        ctypes.memmove(op.dst + i * op.dst_pitch, op.src + i * op.src_pitch, op.width)


class CudaEngine:
    """NVIDIA: stream memory operations and asynchronous 2-D copies through cuda-python's driver API."""

    def __init__(self) -> None:
        from streamk_pgas.iris_ops.backends.cuda_ipc import check, cuda_modules

        self.cu, _ = cuda_modules()
        self._check = check
        self._streams: dict[int, Any] = {}

    def _stream(self, stream: Any) -> Any:
        import torch

        handle = stream.cuda_stream if stream is not None else torch._C._cuda_getCurrentRawStream(
            torch.cuda.current_device())
        s = self._streams.get(handle)
        if s is None:
            s = self._streams[handle] = self.cu.CUstream(handle)
        return s

    def compile(self, op: Op) -> Callable[[Any], None]:
        cu, check = self.cu, self._check
        if isinstance(op, WaitGeq):
            addr, geq = cu.CUdeviceptr(op.addr), cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ
            return lambda stream: check(cu.cuStreamWaitValue32(self._stream(stream), addr, op.value, geq),
                                        "cuStreamWaitValue32")
        if isinstance(op, Copy2D):
            p = cu.CUDA_MEMCPY2D()
            p.srcMemoryType = p.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED
            p.srcDevice, p.srcPitch = cu.CUdeviceptr(op.src), op.src_pitch
            p.dstDevice, p.dstPitch = cu.CUdeviceptr(op.dst), op.dst_pitch
            p.srcXInBytes = p.srcY = p.dstXInBytes = p.dstY = 0
            p.WidthInBytes, p.Height = op.width, op.rows
            return lambda stream: check(cu.cuMemcpy2DAsync(p, self._stream(stream)), "cuMemcpy2DAsync")
        if isinstance(op, Zero32):
            addr = cu.CUdeviceptr(op.addr)
            return lambda stream: check(cu.cuMemsetD32Async(addr, 0, op.count, self._stream(stream)),
                                        "cuMemsetD32Async")
        return lambda stream: op.launch(stream)


class CopySchedule:
    """A step's copy-engine work, compiled once; `schedule(stream)` queues it on `stream` (None: current).

    On a GPU the operations are queued one by one the first time (each a driver call of several
    microseconds), then captured once into a CUDA graph on the op's communication stream, and every later
    call replays that graph: one launch per step. Inside a caller's own graph capture they are queued one
    by one, so they become part of that graph."""

    name = "copy_schedule"
    compiled = None

    def __init__(self, ops: Sequence[Op], engine: HostEngine | CudaEngine) -> None:
        self.ops = list(ops)
        self._calls = [engine.compile(op) for op in self.ops]
        self.launches = [op.launch for op in self.ops if isinstance(op, Launch)]
        self._graphable = isinstance(engine, CudaEngine)
        self._runs = 0
        self._graph: Any = None
        self._graph_stream: Any = None

    def _replay(self, stream: Any) -> bool:
        """Queue the schedule as one graph launch on `stream` (captured at the second call); False where
        it must run op by op (no GPU, no stream of its own, first call, inside a caller's capture)."""
        if not self._graphable or stream is None or self._runs < 1:
            return False
        import torch

        if torch.cuda.is_current_stream_capturing():
            return False
        if self._graph is None:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                for call in self._calls:
                    call(None)
            self._graph, self._graph_stream = graph, stream
        if stream is self._graph_stream:
            with torch.cuda.stream(stream):
                self._graph.replay()
            return True
        return False

    @property
    def fast(self) -> bool:
        return all(x.fast for x in self.launches)

    @property
    def fast_refused(self) -> str | None:
        return next((f"{x.name}: {x.fast_refused}" for x in self.launches if x.fast_refused), None)

    def counts(self) -> dict[str, int]:
        """Operations by kind (what a step costs the host)."""
        return dict(Counter(type(op).__name__ for op in self.ops))

    def __call__(self, stream: Any = None) -> None:
        if self._replay(stream):
            return
        for call in self._calls:
            call(stream)
        self._runs += 1


def make_engine(on_gpu: bool, timeout_s: float) -> HostEngine | CudaEngine:
    """The copy engine of this device: the driver's on an NVIDIA GPU, the host's on the CPU backend."""
    if not on_gpu:
        return HostEngine(timeout_s)
    import torch

    if torch.version.hip is not None:
        raise RuntimeError("mode copy_engine is NVIDIA-only for now (HIP's stream wait-value path is not built)")
    return CudaEngine()


def band_counts(row_bands: list[tuple[int, int]], n_rows: int, words: int) -> list[int]:
    """Initial contents of the count buffer for `row_bands` over `n_rows` tile rows (`words` long): word r < n_rows
    is the index of tile row r's band count (n_rows + band); the counts, after the map, start at 0."""
    init = [0] * words
    for i, (lo, hi) in enumerate(row_bands):
        for r in range(lo, hi):
            init[r] = n_rows + i
    return init


def bands(n_rows: int, count: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges of tile rows: `n_rows` cut into at most `count` nearly equal bands."""
    count = max(1, min(count, n_rows))
    return [(i * n_rows // count, (i + 1) * n_rows // count) for i in range(count)
            if (i + 1) * n_rows // count > i * n_rows // count]
