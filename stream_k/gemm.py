"""Host side of the Stream-K GEMM: workspace, epochs, argument checks, launch, errors, resource usage.

    gemm = StreamKGemm.create(M, N, K, "bf16", num_programs=132)   # plan + default config for this GPU
    gemm(a, b, c)                                                  # one launch; epoch += 1 (on the device)
    gemm.check_errors()                                            # raises if a fix-up wait timed out
    c = matmul(a, b)                                               # one-off convenience (instances cached)

A fused kernel that calls `streamk_program` itself takes its arguments from `gemm.launch_args(...)`
(a dict keyed by streamk_program's parameter names, its groups built: stream_k.kernel_args, the device context
iris_ops.context.DeviceContext; epoch already advanced) and its launch options
from `gemm.launch_options()`.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from typing import Any

import torch

from streamk_pgas.iris_ops.context import device_context, one_rank_bases
from streamk_pgas.iris_ops.device import arch_code, decode_error, default_timer_kind, spin_budget
from streamk_pgas.iris_ops.env import interpreted, on_gpu
from streamk_pgas.stream_k.configs import KernelConfig, current_arch, default_config
from streamk_pgas.stream_k.dtypes import TORCH_DTYPES as DTYPES
from streamk_pgas.stream_k.dtypes import accumulator_dtype, output_dtype
from streamk_pgas.stream_k.kernel import store_and_signal, store_tma_and_signal, streamk_gemm_kernel
from streamk_pgas.stream_k.kernel_args import Schedule, Sizes, Tiling, Workspace, constexprs
from streamk_pgas.stream_k.launch import BoundLaunch
from streamk_pgas.stream_k.layout import buffer_key, padded_zeros, tma_rows, vector_stride_multiple
from streamk_pgas.stream_k.plan import AUTO_SCHEDULE, StreamKPlan, plan_streamk
from streamk_pgas.stream_k.select import choose_gemm
from streamk_pgas.stream_k.tiles import width_parts

_INT32_MAX = 2**31 - 1


def c_store_columns(blk_m: int, blk_n: int, elem: int) -> int:
    """Columns of the pieces store_tma_and_signal stores a tile in (its C descriptor's block width): 16 KiB pieces,
    but no fewer columns than a quarter of the tile; a tile of two column blocks (stream_k.tiles.width_parts), the
    narrower block's width, a half or a quarter of the wider one's."""
    narrow = width_parts(blk_n)[1]
    return narrow or max(blk_n // 4, min(blk_n, 16384 // (blk_m * elem)))


BOUND_LAUNCHES = 16  # buffer sets whose bound launch a StreamKGemm keeps


def plain_key(a: Any, b: Any, c: Any) -> tuple | None:
    """What a plain call's bound launch depends on: each tensor's buffer_key (None for a non-tensor, which the full
    path's checks name)."""
    try:
        return (buffer_key(a), buffer_key(b), buffer_key(c))
    except AttributeError:
        return None


def dtype_name(dtype: torch.dtype | str) -> str:
    """"bf16" / "fp16" / "fp32" / "int8" for a torch dtype or one of those names."""
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
        return dtype
    for name, td in DTYPES.items():
        if td == dtype:
            return name
    raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype}")


def is_hip() -> bool:
    return bool(getattr(torch.version, "hip", None)) and not interpreted()


def default_num_programs(device: torch.device | str | None = None) -> int:
    """All SMs / CUs of the GPU; 4 in the interpreter (programs run one after another there)."""
    if not on_gpu():
        return 4
    dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    return torch.cuda.get_device_properties(dev).multi_processor_count


def default_device() -> torch.device:
    if not on_gpu():
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())


class StreamKGemm:
    """One GEMM shape on one device: its plan, kernel config, workspace and epoch counter.

    Workspace (plain device tensors, owned here): `partials` P [num_programs, BLK_M, BLK_N] fp32
    (int32 for int8), `locks` [num_programs] int32, `errors` [1] int32, `clock` [1] int64 (the
    interpreter's logical timer), `launches` [1] int64 (the device's launch counter). Locks and caller-supplied
    tile flags hold epochs: every launch uses `epoch + 1`, so flags and locks left by earlier launches are always
    older than the one awaited and are never reset. Launches that share this workspace must not run concurrently.

    A call's epoch is counted on the device (the kernel's LAUNCHES), so a launch captured in a CUDA graph gets a
    new epoch at every replay; `epoch` here is the host's count of calls (after graph replays it lags the
    device's). A call with an explicit `epoch=` passes it as an argument instead (a consumer of the tile flags
    that knows it), and the device's count continues after it (so does it after `launch_args`); after graph
    replays an explicit epoch must still exceed every epoch the replays used. The launch of the last buffers
    used is bound once (stream_k.launch.BoundLaunch): repeated calls on the same tensors cost the host a few
    microseconds.
    """

    def __init__(self, plan: StreamKPlan, dtype: torch.dtype | str, config: KernelConfig | None = None, *,
                 device: torch.device | str | None = None, timeout_s: float = 10.0, arch: str | None = None) -> None:
        """`arch`: the GPU the launches are for, as current_arch names it ("sm90", "gfx942"; None: this process's
        device); the default config, the AMD options and the timer follow it, so `launch_spec` on CPU tensors gives
        another GPU's launch for an ahead-of-time compile."""
        self.plan = plan
        self.dtype_name = dtype_name(dtype)
        self.dtype = DTYPES[self.dtype_name]
        self.out_dtype = output_dtype(self.dtype_name)
        self.arch = current_arch() if arch is None else arch
        cfg = config if config is not None else default_config(self.dtype_name, self.arch)
        cfg = cfg.replace(BLK_M=plan.BLK_M, BLK_N=plan.BLK_N, BLK_K=plan.BLK_K, gsize_m=plan.gsize_m)
        if config is not None and (config.BLK_M, config.BLK_N, config.BLK_K) != (plan.BLK_M, plan.BLK_N, plan.BLK_K):
            raise ValueError(f"config blocks {config.BLK_M}x{config.BLK_N}x{config.BLK_K} differ from the plan's "
                             f"{plan.BLK_M}x{plan.BLK_N}x{plan.BLK_K}")
        if width_parts(plan.BLK_N)[1] and not cfg.tma:
            raise ValueError(f"a tile {plan.BLK_N} columns wide (two column blocks) needs tma=True")
        if self.dtype_name == "int8" and plan.BLK_K < 32:
            raise ValueError(f"BLK_K must be >= 32 for int8 inputs (tl.dot's minimum); got {plan.BLK_K}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0; got {timeout_s}")
        self.config = cfg
        self.device = torch.device(device) if device is not None else default_device()
        self.timeout_s = timeout_s
        self.max_spins = spin_budget(timeout_s)
        self.timer_kind = default_timer_kind(None if arch is None else arch_code(arch))
        self.partials = torch.empty(plan.partials_shape, dtype=accumulator_dtype(self.dtype_name), device=self.device)
        self.locks = torch.zeros(plan.locks_len, dtype=torch.int32, device=self.device)
        self.errors = torch.zeros(1, dtype=torch.int32, device=self.device)
        self.clock = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.launches = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.one_rank_bases = one_rank_bases(self.device)  # the device context's heap bases where none are given
        self.epoch = 0
        self._counted = 0  # the host's count when the device last counted a launch
        self._bound: OrderedDict[tuple, BoundLaunch] = OrderedDict()  # the call's buffers -> their bound launch
        # plain calls (no epilogue, flags, trace or peers) on A, B read in place: the bound launch by plain_key,
        # without the checks and the staging decision
        self._plain: OrderedDict[tuple, BoundLaunch] = OrderedDict()
        self.hip = is_hip() if arch is None else arch_code(arch) == 2
        amd = {"waves_per_eu": cfg.waves_per_eu, "matrix_instr_nonkdim": cfg.matrix_instr_nonkdim, "kpack": cfg.kpack}
        self._amd_options = {k: v for k, v in amd.items() if v is not None} if self.hip else {}
        self.unused_options = [] if self.hip else [k for k, v in amd.items() if v is not None]
        if cfg.num_xcds > 1 and not self.hip:
            self.unused_options.append("num_xcds")
        self.num_xcds = cfg.num_xcds if self.hip else 1
        self._compiled: Any = None
        self._p_desc: Any = None
        self._stages: list[torch.Tensor | None] = [None, None]  # A's and B's staging buffers (rows not TMA-aligned)
        self.staged_copies = 0

    @classmethod
    def create(cls, M: int, N: int, K: int, dtype: torch.dtype | str, num_programs: int | None = None, *,
               config: KernelConfig | None = None, schedule: str = AUTO_SCHEDULE, two_tiles: bool = True,
               sk_first: bool = False, sk_rounds: int = 1, split_k: int | None = None,
               device: torch.device | str | None = None, timeout_s: float = 10.0) -> StreamKGemm:
        """Plan M x N x K over num_programs (default: every SM). Without `config` the tile, TMA and (with schedule
        "auto") the schedule are chosen for the shape (stream_k.select.choose_gemm); with one, `schedule` "auto"
        takes the cheaper of data-parallel and the one-tile hybrid for that tile (stream_k.plan)."""
        name = dtype_name(dtype)
        dev = torch.device(device) if device is not None else default_device()
        programs = num_programs if num_programs is not None else default_num_programs(dev)
        if config is None:
            fixed = {"schedule": schedule, "sk_first": sk_first, "sk_rounds": sk_rounds, "split_k": split_k,
                     "two_tiles": None if schedule == AUTO_SCHEDULE else two_tiles}
            choice = choose_gemm(M, N, K, name, programs, current_arch(), sms=default_num_programs(dev),
                                 fixed=fixed)
            return cls(choice.plan, name, choice.config, device=dev, timeout_s=timeout_s)
        plan = plan_streamk(M, N, K, config.BLK_M, config.BLK_N, config.BLK_K, programs, gsize_m=config.gsize_m,
                            two_tiles=two_tiles, schedule=schedule, sk_first=sk_first, sk_rounds=sk_rounds,
                            split_k=split_k)
        return cls(plan, name, config, device=dev, timeout_s=timeout_s)

    # ---- launching ------------------------------------------------------------------------------

    def next_epoch(self, epoch: int | None = None) -> int:
        """Advance and return the epoch (or jump to `epoch`, which must be larger than the current one)."""
        if epoch is None:
            epoch = self.epoch + 1
        elif epoch <= self.epoch:
            raise ValueError(f"epoch must exceed the last one used on this workspace ({self.epoch}); got {epoch}")
        if epoch > _INT32_MAX:
            raise ValueError("epoch overflowed int32; create a new StreamKGemm (fresh workspace)")
        self.epoch = epoch
        return epoch

    def _check(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tile_flags: torch.Tensor | None,
               gemm_trace: torch.Tensor | None) -> None:
        p = self.plan
        for name, t, shape, dt in (("a", a, (p.M, p.K), self.dtype), ("b", b, (p.K, p.N), self.dtype),
                                   ("c", c, (p.M, p.N), self.out_dtype)):
            if tuple(t.shape) != shape:
                raise ValueError(f"{name} must have shape {shape}; got {tuple(t.shape)}")
            if t.dtype != dt:
                raise ValueError(f"{name} must be {dt}; got {t.dtype}")
            if t.device != self.partials.device:
                raise ValueError(f"{name} is on {t.device}; this GEMM's workspace is on {self.partials.device}")
            if (t.shape[0] - 1) * abs(t.stride(0)) + (t.shape[1] - 1) * abs(t.stride(1)) > _INT32_MAX:
                raise ValueError(f"{name} is too large for the kernel's 32-bit offsets")
        if tile_flags is not None and (tile_flags.dtype != torch.int32 or tile_flags.numel() < p.num_tiles):
            raise ValueError(f"tile_flags must be int32 with >= {p.num_tiles} elements")
        if gemm_trace is not None and (gemm_trace.dtype != torch.int64 or tuple(gemm_trace.shape) != (p.num_tiles, 3)
                                       or not gemm_trace.is_contiguous()):
            raise ValueError(f"gemm_trace must be a contiguous int64 tensor of shape ({p.num_tiles}, 3)")

    def launch_args(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *,
                    tile_flags: torch.Tensor | None = None, gemm_trace: torch.Tensor | None = None,
                    epilogue: Any = None, heap_bases: torch.Tensor | None = None, cur_rank: int = 0,
                    world_size: int = 1, epoch: int | None = None, row_shift: int = 0) -> dict[str, Any]:
        """streamk_program's arguments (except pid, num_programs) by name, for one launch; advances the epoch.
        `row_shift`: the tile order starts that many tile rows down (and wraps around)."""
        return self._args(a, b, c, tile_flags, gemm_trace, epilogue, heap_bases, cur_rank, world_size,
                          self.next_epoch(epoch), row_shift)

    def _args(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tile_flags: torch.Tensor | None,
              gemm_trace: torch.Tensor | None, epilogue: Any, heap_bases: torch.Tensor | None, cur_rank: int,
              world_size: int, epoch: int, row_shift: int = 0) -> dict[str, Any]:
        self._check(a, b, c, tile_flags, gemm_trace)
        p, cfg = self.plan, self.config
        A, B, B1 = (self._descriptors(a, b) if cfg.tma else (a, b, None))
        narrow = width_parts(p.BLK_N)[1]  # a tile of two column blocks: data-parallel, no fix-up (stream_k.kernel)
        C = c
        if epilogue is None and cfg.tma and tma_rows(c):  # the copy engine stores C (any 16-byte aligned rows)
            from triton.tools.tensor_descriptor import TensorDescriptor

            C = TensorDescriptor.from_tensor(c, [p.BLK_M, c_store_columns(p.BLK_M, p.BLK_N, c.element_size())])
            epilogue = store_tma_and_signal
        ctx = device_context(heap_bases if heap_bases is not None else self.one_rank_bases, cur_rank, world_size,
                             self.errors, self.clock, self.max_spins, self.timer_kind)
        return {
            "A": A, "B": B, "C": C, "WORK": Workspace(self.partials, self.locks),
            "TILE_FLAGS": tile_flags, "GEMM_TRACE": gemm_trace,
            "SIZES": Sizes(p.M, p.N, p.K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                           row_shift % p.tiles_m),
            "sk_tiles": p.sk_tiles, "epoch": epoch, "CTX": ctx,
            "TILING": constexprs(Tiling, BLK_M=p.BLK_M, BLK_N=p.BLK_N, BLK_K=p.BLK_K, GSIZE_M=p.gsize_m,
                                 EVEN_K=p.even_k, BLK_N1=narrow, USE_TMA=cfg.tma,
                                 STRIDE_ALIGN=1 if cfg.tma else vector_stride_multiple(a, b),
                                 INPUT_PRECISION=cfg.input_precision if self.dtype_name == "fp32" else None),
            "SCHEDULE": constexprs(Schedule, SK_FIRST=p.sk_first, SK_ROUNDS=p.sk_rounds, SPLIT_K=p.split_k,
                                   NUM_XCDS=self.num_xcds, REDUCE_LOADS=cfg.reduce_loads,
                                   FIXUP_BY_HALF=cfg.fixup_by_half),
            "EPILOGUE": epilogue if epilogue is not None else store_and_signal,
            "P_DESC": self._partials_descriptor() if cfg.tma and not narrow else None,
            "B1": B1,
        }

    def _partials_descriptor(self) -> Any:
        """The workspace as a tensor descriptor over [slots * BLK_M, BLK_N], blocks of half a tile (made once)."""
        if self._p_desc is None:
            from triton.tools.tensor_descriptor import TensorDescriptor

            p = self.plan
            self._p_desc = TensorDescriptor.from_tensor(self.partials.view(-1, p.BLK_N), [p.BLK_M, p.BLK_N // 2])
        return self._p_desc

    def _descriptors(self, a: torch.Tensor, b: torch.Tensor) -> tuple[Any, Any, Any]:
        """Tensor descriptors of A (blocks BLK_M x BLK_K) and B (BLK_K x BLK_N) for the TMA path; a tile of two
        column blocks reads B through two (BLK_K x each block's width; the second is None otherwise)."""
        from triton.tools.tensor_descriptor import TensorDescriptor

        p = self.plan
        for name, t in (("a", a), ("b", b)):
            if not tma_rows(t):
                raise ValueError(f"tma=True needs {name} row-major with 16-byte aligned rows; got strides {t.stride()}")
        wide, narrow = width_parts(p.BLK_N)
        return (TensorDescriptor.from_tensor(a, [p.BLK_M, p.BLK_K]),
                TensorDescriptor.from_tensor(b, [p.BLK_K, wide]),
                TensorDescriptor.from_tensor(b, [p.BLK_K, narrow]) if narrow else None)

    def launch_spec(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *,
                    tile_flags: torch.Tensor | None = None, gemm_trace: torch.Tensor | None = None,
                    epilogue: Any = None, heap_bases: torch.Tensor | None = None, cur_rank: int = 0,
                    world_size: int = 1) -> BoundLaunch:
        """The launch a call on these buffers makes (kernel, programs, arguments, options), bound and not run."""
        if self.config.tma:
            a, b = self._staged(a, 0), self._staged(b, 1)
        return self._launch_for(a, b, c, tile_flags, gemm_trace, epilogue, heap_bases, cur_rank, world_size)[0]

    def launch_options(self) -> dict[str, Any]:
        """num_warps, num_stages, and the AMD options when running on HIP."""
        return {"num_warps": self.config.num_warps, "num_stages": self.config.num_stages, **self._amd_options}

    def __call__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, *,
                 tile_flags: torch.Tensor | None = None, gemm_trace: torch.Tensor | None = None,
                 epilogue: Any = None, heap_bases: torch.Tensor | None = None, cur_rank: int = 0,
                 world_size: int = 1, stream: Any = None, epoch: int | None = None) -> torch.Tensor:
        """Launch C = A @ B on `stream` (default: the current stream) with num_programs programs; returns c.

        The epoch is counted on the device (the class's docstring), so the launch may be captured in a CUDA graph
        and replayed. An explicit `epoch` is an argument of the launch instead: capturing such a call is refused
        (RuntimeError), since every replay would reuse it.

        With TMA on (the default on NVIDIA sm_90+), A and B are read in place when their rows are 16-byte aligned
        (stream_k.layout.tma_rows: for bf16 / fp16, a row stride that is a multiple of 8 elements); otherwise each
        is first copied into a staging buffer of this GEMM with padded rows (one device copy per call, counted in
        `staged_copies`), and C is stored by the copy engine when its rows are 16-byte aligned, else by the
        program's threads. A plain call (no epilogue, flags, trace or peers) on tensors at the addresses, strides,
        shapes and dtypes of an earlier call that read them in place reuses that call's bound launch, whether they
        are the same tensors or new ones there (a dropped activation's successor); the launch keeps no reference
        to the caller's tensors once bound (BoundLaunch.release)."""
        plain = (epoch is None and epilogue is None and tile_flags is None and gemm_trace is None and heap_bases is None
                 and world_size == 1 and cur_rank == 0)
        if plain and self._counted == self.epoch:
            known = self._plain.get(plain_key(a, b, c))
            if known is not None:
                self._counted = self.next_epoch()
                known(stream if stream is not None and self.partials.is_cuda else None)
                return c
        given = (a, b)
        if self.config.tma:
            a, b = self._staged(a, 0), self._staged(b, 1)
        if epoch is not None:
            self._refuse_capture(stream)
            args = self.launch_args(a, b, c, tile_flags=tile_flags, gemm_trace=gemm_trace, epilogue=epilogue,
                                    heap_bases=heap_bases, cur_rank=cur_rank, world_size=world_size, epoch=epoch)
            launch = BoundLaunch(streamk_gemm_kernel, self.plan.num_programs, {**args, "LAUNCHES": None},
                                 self.launch_options())
        else:
            launch, new = self._launch_for(a, b, c, tile_flags, gemm_trace, epilogue, heap_bases, cur_rank, world_size)
            if plain and a is given[0] and b is given[1]:  # read in place: the next such call goes straight to it
                self._plain[plain_key(a, b, c)] = launch
                if len(self._plain) > BOUND_LAUNCHES:
                    self._plain.popitem(last=False)
            if self._counted != self.epoch:
                # an explicit epoch or launch_args moved the host's count since the device last counted: the
                # device's count goes on after it (in stream order, before this launch)
                on = (torch.cuda.stream(stream) if stream is not None and self.launches.is_cuda
                      else contextlib.nullcontext())
                with on:
                    self.launches.fill_(self.epoch * self.plan.num_programs)
            self._counted = self.next_epoch()
        launch(stream if stream is not None and self.partials.is_cuda else None)
        if self._compiled is None and launch.compiled is not None:
            self._compiled = launch.compiled
        if epoch is None and new:  # bound now: the caller's buffers need not be kept alive for it
            launch.release(*given, c)
        return c

    def _staged(self, t: torch.Tensor, which: int) -> torch.Tensor:
        """`t` itself when the copy engine can read its rows, else a copy in this GEMM's staging buffer (made once)."""
        if tma_rows(t):
            return t
        stage = self._stages[which]
        if stage is None or stage.shape != t.shape or stage.dtype != t.dtype or stage.device != t.device:
            stage = padded_zeros(t.shape[0], t.shape[1], t.dtype, t.device)
            self._stages[which] = stage
        stage.copy_(t)
        self.staged_copies += 1
        return stage

    def _launch_for(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tile_flags: torch.Tensor | None,
                    gemm_trace: torch.Tensor | None, epilogue: Any, heap_bases: torch.Tensor | None, cur_rank: int,
                    world_size: int) -> tuple[BoundLaunch, bool]:
        """The bound launch of these buffers with the device-counted epoch, and whether it was made now (the last
        BOUND_LAUNCHES buffer sets are kept, by stream_k.layout.buffer_key, so a caller rotating a few input sets, or
        handing fresh tensors that get the freed addresses back, stays on bound launches)."""
        buffers = [buffer_key(t) if isinstance(t, torch.Tensor) else t
                   for t in (a, b, c, tile_flags, gemm_trace, heap_bases)]
        key = (*buffers, epilogue, cur_rank, world_size)
        launch = self._bound.get(key)
        new = launch is None
        if launch is None:
            args = self._args(a, b, c, tile_flags, gemm_trace, epilogue, heap_bases, cur_rank, world_size, 0)
            launch = BoundLaunch(streamk_gemm_kernel, self.plan.num_programs, {**args, "LAUNCHES": self.launches},
                                 self.launch_options())
            self._bound[key] = launch
            if len(self._bound) > BOUND_LAUNCHES:
                self._bound.popitem(last=False)
        else:
            self._bound.move_to_end(key)
        return launch, new

    def _refuse_capture(self, stream: Any) -> None:
        """RuntimeError if this launch (with an explicit epoch) is being captured into a CUDA graph."""
        if not self.partials.is_cuda:
            return
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            capturing = torch.cuda.is_current_stream_capturing()
        if capturing:
            raise RuntimeError("StreamKGemm: a CUDA graph would replay this launch's explicit epoch; capture calls "
                               "without epoch= (their epoch is counted on the device)")

    # ---- after launching ------------------------------------------------------------------------

    def check_errors(self) -> None:
        """Raise RuntimeError if a launch recorded an error (the word is cleared first). Synchronises."""
        code = int(self.errors.item())
        if code:
            self.errors.zero_()
            raise RuntimeError(f"Stream-K GEMM: {decode_error(code)}")

    def resource_usage(self) -> dict[str, Any] | None:
        """Registers, spills and shared memory of the last compiled kernel (None in the interpreter)."""
        k = self._compiled
        if k is None:
            return None
        for init in ("_init_handles",):
            if hasattr(k, init):
                getattr(k, init)()
        return {"registers": getattr(k, "n_regs", None), "spills": getattr(k, "n_spills", None),
                "shared_bytes": getattr(k.metadata, "shared", None), "num_warps": self.config.num_warps,
                "num_stages": self.config.num_stages}

    def info(self) -> dict[str, Any]:
        """Plan, config, epoch and the options that had no effect on this backend."""
        return {"plan": self.plan.as_dict(), "config": self.config.as_dict(), "dtype": self.dtype_name,
                "device": str(self.device), "arch": self.arch, "epoch": self.epoch,
                "staged_copies": self.staged_copies,
                "timeout_s": self.timeout_s, "max_spins": self.max_spins, "timer_kind": self.timer_kind,
                "unused_options": list(self.unused_options)}


_CACHE: dict[tuple, StreamKGemm] = {}


def matmul(a: torch.Tensor, b: torch.Tensor, num_programs: int | None = None, *,
           schedule: str = AUTO_SCHEDULE, two_tiles: bool = True, config: KernelConfig | None = None,
           **cfg: Any) -> torch.Tensor:
    """C = A @ B with the Stream-K kernel (new output tensor). Without `config` or `cfg` the GEMM is chosen for the
    shape (StreamKGemm.create); `cfg` overrides fields of `config` (default: the arch's default config)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs a (M, K) and b (K, N); got {tuple(a.shape)} and {tuple(b.shape)}")
    name = dtype_name(a.dtype)
    conf = None
    if config is not None or cfg:
        base = config if config is not None else default_config(name)
        conf = base.replace(**cfg) if cfg else base
    M, K = a.shape
    N = b.shape[1]
    programs = num_programs if num_programs is not None else default_num_programs(a.device)
    key = (M, N, K, name, str(a.device), programs, schedule, two_tiles, conf)
    gemm = _CACHE.get(key)
    if gemm is None:
        if len(_CACHE) > 32:
            _CACHE.clear()
        gemm = StreamKGemm.create(M, N, K, name, programs, config=conf, schedule=schedule, two_tiles=two_tiles,
                                  device=a.device)
        _CACHE[key] = gemm
    c = torch.empty((M, N), dtype=gemm.out_dtype, device=a.device)
    gemm(a, b, c)
    return c
