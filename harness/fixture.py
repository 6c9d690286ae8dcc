"""What only the benchmark does around the op: draw the inputs, poison the outputs, validate, time each kernel
group, trace.

`OverlapFixture(cfg, shmem)` builds the library op (overlap.OverlapOp) from benchmark.py's resolved config
(`cfg.op`, planned once), draws the same seeded global A and B on every rank, writes this rank's shards
(spec.sharding) into the op's input buffers, and offers validation against float64 torch, the per-kernel spans
of the isolated timing, the GEMM and the communication timed alone, and the per-tile traces. The launches and
their state belong to the op; nothing here launches a kernel except through its steps.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch

from streamk_pgas import spec
from streamk_pgas.harness.config import BenchConfig
from streamk_pgas.harness.dtypes import random_inputs
from streamk_pgas.harness.validate import compare_tiles, inputs_failure, nonfinite_inputs, reference_product
from streamk_pgas.iris_ops import Iris
from streamk_pgas.overlap.op import OverlapOp
from streamk_pgas.overlap.resolution import heap_bytes
from streamk_pgas.overlap.step import StepLaunches

# How often a back-to-back loop looks at the error words: often enough to stop soon after a give-up, rarely enough
# that a step's host cost does not change (a look on a GPU queues a small copy on a side stream).
PEEK_EVERY_S = 0.5


def heap_bytes_needed(cfg: BenchConfig, world_size: int) -> int:
    """Bytes of symmetric heap the run allocates (checked before the heap is created)."""
    return heap_bytes(cfg.op, world_size)


def part(t: torch.Tensor, where: tuple[tuple[int, int], tuple[int, int]]) -> torch.Tensor:
    """The block of `t` that a spec.sharding slice names."""
    (r0, r1), (c0, c1) = where
    return t[r0:r1, c0:c1]


class OverlapFixture:
    def __init__(self, cfg: BenchConfig, shmem: Iris) -> None:
        self.cfg = cfg
        self.op = OverlapOp(cfg.op, shmem)
        op = self.op
        self.family = spec.ALGORITHMS[cfg.algorithm].family
        self.on_gpu = op.on_gpu
        self.tiles = op.buffers.tiles
        _, self.local_n, self.local_k = self.family.gemm_shape(cfg.m, cfg.n, cfg.k, op.world)
        self.tracing = False  # set for the one traced iteration, so timed iterations carry no timer reads
        self._steps: dict[str, StepLaunches] = {}  # the steps this fixture has run, by kind
        self._launched: set[int] = set()  # ids of the steps launched at least once (their first launch compiles)
        # Inputs: the same global A and B on every rank (same seed), each rank keeps its shard in the op's buffers.
        gen = torch.Generator(device=op.device).manual_seed(cfg.seed)
        self.a_full = random_inputs((cfg.m, cfg.k), cfg.datatype, gen, op.device)
        self.b_full = random_inputs((cfg.k, cfg.n), cfg.datatype, gen, op.device)
        r, w = op.rank, op.world
        op.a.copy_(part(self.a_full, self.family.a_slice(r, cfg.m, cfg.k, w)))
        op.b.copy_(part(self.b_full, self.family.b_slice(r, cfg.k, cfg.n, w)))
        self._refs: tuple[torch.Tensor, torch.Tensor | None] | None = None

    # ---- launches (through the op's steps) -----------------------------------------------------------------
    def _step(self, kind: str) -> StepLaunches:
        start = time.monotonic()
        step = self.op.step_for(kind)
        if self._steps.get(kind) is not step:
            self._first_use(start)  # built now: its kernels bound (compiled, on a GPU)
        self._steps[kind] = step
        return step

    def _first_use(self, start: float) -> None:
        """The host time since `start` went into a step's first build or launch, where a GPU compiles its kernels:
        every rank does it, each in its own time, so the next host wait allows for it on top of --timeout_s
        (iris_ops.bootstrap.Bootstrap.allow_grace). The interpreter compiles nothing."""
        if self.on_gpu:
            self.op.shmem.bootstrap.allow_grace(time.monotonic() - start)

    def step(self, timer: Any = None) -> None:
        self.run(self._step("traced" if self.tracing else "step"), timer)

    def gemm_alone(self, timer: Any) -> None:
        """The GEMM on --gemm_sms programs with nothing else running (a step of its own)."""
        self.run(self._step("gemm_alone"), timer)

    def comm_alone(self, timer: Any) -> None:
        """The communication on the other programs, every tile taken as ready (a step of its own)."""
        self.run(self._step("comm_alone"), timer)

    def prepare(self) -> None:
        """Bind (and, for two_streams, preload) the next step's kernels: every rank together, untimed."""
        self._step("traced" if self.tracing else "step")

    def run(self, step: StepLaunches, timer: Any = None) -> None:
        """Queue a step; with `timer` (harness.timing.StepTimer) each kernel group is bracketed by a named span
        (the isolated benchmark's per-kernel times), launched piece by piece."""
        first, start = id(step) not in self._launched, time.monotonic()
        self._launched.add(id(step))
        self._run(step, timer)
        if first:
            self._first_use(start)

    def _run(self, step: StepLaunches, timer: Any = None) -> None:
        if timer is None:
            self.op.run(step)
            return
        self.op.check_usable()
        comm = self.op.runner.comm_stream
        if step.pre:
            with timer.span(step.pre_name):
                for action in step.pre:
                    action()
        if step.side is not None and comm is not None:
            cur = torch.cuda.current_stream(self.op.device)
            comm.wait_stream(cur)
            for name, group in step.main:
                with timer.span(name, cur):
                    for launch in group:
                        launch()
            with timer.span(step.side_name, comm):
                step.side()
            cur.wait_stream(comm)
        else:
            groups = list(step.main)
            if step.side is not None:
                groups.insert(0 if step.side_first else len(groups), (step.side_name, [step.side]))
            for name, group in groups:
                with timer.span(name):
                    for launch in group:
                        launch()
        if step.post:
            with timer.span(step.post_name):
                for action in step.post:
                    action()

    # ---- errors: no wait of the run outlives a peer that gave up or hangs ---------------------------------
    def check_errors(self) -> None:
        """Every rank: raise iris_ops.CollectiveError if a wait of any step so far gave up on any rank. This
        rank's own words are read first (its device work drained): a give-up already here is raised at once,
        without meeting a peer that may hang (record_error_all put it into every rank's words, so the others
        raise too); otherwise the op's check meets every rank before it decides."""
        self.op.error_state.check(timeout_s=self.cfg.op.timeout_s)
        self.op.check_errors()

    def barrier(self) -> None:
        """The host barrier of the timing loops: this rank's own error words first (as check_errors), so a rank
        whose step gave up (a peer died or hangs) raises here instead of waiting for that peer."""
        self.op.error_state.check(timeout_s=self.cfg.op.timeout_s)
        self.op.shmem.barrier()

    def back_to_back(self, launch: Callable[[], Any]) -> Callable[[], None]:
        """`launch` for a loop of steps with nothing between them: after a launch, at most every PEEK_EVERY_S, a
        look at the error words that never waits for the device or a peer (ErrorState.peek); once any rank has
        given up, CollectiveError is raised here, so a hung peer ends the run within about one wait timeout
        instead of after every remaining step has given up on it in turn."""
        state, timeout_s = self.op.error_state, self.cfg.op.timeout_s
        last = [time.monotonic()]

        def step() -> None:
            launch()
            now = time.monotonic()
            if now - last[0] >= PEEK_EVERY_S:
                last[0] = now
                if state.peek():
                    state.check(timeout_s=timeout_s)

        return step

    # ---- checks -----------------------------------------------------------------------------------
    def poison(self) -> None:
        """Fill every output with a sentinel so that an unwritten or stale element fails validation."""
        bufs = self.op.buffers
        bad = float("nan") if self.op.out_dtype.is_floating_point else -(2**31) + 7
        bufs.heap_c.fill_(bad)  # C's storage (padded rows), or the wide C of unaligned all_scatter
        if bufs.wide_c:
            bufs.c.fill_(bad)  # then C is a buffer of its own
        for plane in bufs.partial_planes:
            plane.fill_(bad)

    def validate(self) -> dict[str, Any]:
        """C on this rank (its part of the whole product, spec.sharding) and this rank's own share (the GEMM's
        output where it is not C), against float64 products of the same inputs."""
        cfg, op, bufs = self.cfg, self.op, self.op.buffers
        kc = op.cfg.kernel
        assert kc is not None
        bad = nonfinite_inputs(A=self.a_full, B=self.b_full)
        if bad:  # the product itself is not finite: no output can be judged, and no kernel is to blame
            return {"global": inputs_failure(bad), "partial": {"passed": True, "skipped": "the inputs are not finite"},
                    "passed": False}
        if self._refs is None:  # computed once: --validate_iters validates many iterations against them
            full = reference_product(self.a_full, self.b_full)
            local = None if bufs.gemm_out is bufs.c or op.world == 1 else reference_product(op.a, op.b)
            self._refs = (part(full, self.family.c_slice(op.rank, cfg.m, cfg.n, op.world)), local)
        ref_c, ref_local = self._refs
        result: dict[str, Any] = {"global": compare_tiles(bufs.c, ref_c, cfg.datatype, kc.BLK_M, kc.BLK_N,
                                                          kc.gsize_m)}
        if op.world == 1:
            result["partial"] = {"passed": True, "skipped": "one rank: the GEMM writes C itself"}
        elif ref_local is None:
            result["partial"] = {"passed": True, "skipped": f"{cfg.algorithm}: the GEMM writes C itself"}
        else:
            result["partial"] = compare_tiles(bufs.gemm_result(), ref_local, cfg.datatype, kc.BLK_M, kc.BLK_N,
                                              kc.gsize_m)
        result["passed"] = bool(result["global"]["passed"] and result["partial"]["passed"])
        return result

    # ---- what the log reads ---------------------------------------------------------------------------
    def trace_arrays(self) -> dict[str, Any]:
        """Host copies of the per-tile timestamps of the last traced iteration."""
        bufs = self.op.buffers
        if bufs.gemm_trace is None or bufs.comm_trace is None:
            return {}
        return {"gemm": bufs.gemm_trace.cpu().numpy(), "comm": bufs.comm_trace.cpu().numpy()}

    def launches(self) -> list[Any]:
        """The kernel launches of the steps run so far (no step is built here: building one is collective)."""
        return [x for step in self._steps.values() for x in step.kernels()]

    def bound_fast(self) -> bool:
        """Whether every launch of the main step went through the bound launcher (the low-host-cost path)."""
        step = self._steps.get("step")
        return step is not None and all(x.fast for x in step.launches() if hasattr(x, "fast"))

    def fast_refused(self) -> dict[str, str]:
        """Kernel name -> why the bound launcher was not used, for the main step's launches."""
        step = self._steps.get("step")
        if step is None:
            return {}
        return {x.name: x.fast_refused for x in step.launches() if getattr(x, "fast_refused", None)}

    def resource_usage(self) -> dict[str, Any]:
        """Registers, spills and shared memory of each compiled kernel (empty in the interpreter)."""
        usage: dict[str, Any] = {}
        for launch in self.launches():
            k = launch.compiled
            if k is None or launch.name in usage:
                continue
            with contextlib.suppress(Exception):
                k._init_handles()
            usage[launch.name] = {"registers": getattr(k, "n_regs", None), "spills": getattr(k, "n_spills", None),
                                  "shared_bytes": getattr(k.metadata, "shared", None),
                                  "num_warps": getattr(k.metadata, "num_warps", None)}
        return usage

    def info(self) -> dict[str, Any]:
        return self.op.info()
