"""The launches a step is made of, bound to one op's buffers, GEMMs and heap: the mode classes (overlap.modes)
put them together. Every launch is a stream_k.launch.BoundLaunch (kernel, grid, argument values, options), so
a step's launches can be listed, and compiled for another target, without running them.

    alone        world 1: the stand-alone GEMM kernel writing C itself (nothing to communicate)
    overlap      overlap_kernel: GEMM programs, then communication programs (or none)
    comm         comm_kernel: communication programs alone
    announce / ce_start / ce_finish     the step protocol's small kernels
    copy_schedule, compaction, reduce_rows_post             copy_engine's schedule; host-queued device copies
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton.language as tl

from streamk_pgas import spec
from streamk_pgas.iris_ops.context import DeviceContext, device_context
from streamk_pgas.overlap.algorithms import AlgorithmRecord
from streamk_pgas.overlap.algorithms.all_gather_gemm import a_chunk_cols, a_segment_cols
from streamk_pgas.overlap.bands import reduce_rows_shift
from streamk_pgas.overlap.buffers import OpBuffers
from streamk_pgas.overlap.communication.copy_engine import CopySchedule, make_engine, store_and_count
from streamk_pgas.overlap.config import OverlapConfig
from streamk_pgas.overlap.copy_steps import (
    ce_pulls_a,
    column_word_pattern,
    column_words_action,
    gather_a_own_ops,
    gathers_a_in_columns,
    own_in_place,
    reduce_rows_post,
    schedule_ops,
    schedule_pre_ops,
)
from streamk_pgas.overlap.kernel_args import Gather, Move, MoveFlags, Step, StepFlags, constexprs
from streamk_pgas.overlap.kernels import (
    announce_kernel,
    ce_finish_kernel,
    ce_start_kernel,
    comm_kernel,
    overlap_kernel,
)
from streamk_pgas.spec import Target
from streamk_pgas.stream_k import StreamKGemm, streamk_gemm_kernel
from streamk_pgas.stream_k.kernel_args import unwrapped
from streamk_pgas.stream_k.launch import BoundLaunch
from streamk_pgas.stream_k.layout import padded_cols, vector_cols
from streamk_pgas.stream_k.select import GemmChoice, choose_gemm


def ticket_span(tiles: int, owners: int, pieces: int, programs: int) -> int:
    """Pieces of a tile one communication ticket moves (overlap.communication.comm_loop): the whole tile (one wait
    for its ready words) where each program gets two tiles or more, else one piece, so that few tiles still spread
    over the programs (the GEMM programs that join later share the same tickets)."""
    mine = -(-tiles // owners)
    return pieces if mine >= 2 * max(1, programs) else 1


class Parts:
    """One op's launch builders (see the module docstring)."""

    def __init__(self, cfg: OverlapConfig, alg: AlgorithmRecord, bufs: OpBuffers, target: Target, rank: int, world: int,
                 heap_bases: torch.Tensor, device: torch.device) -> None:
        assert cfg.kernel is not None and cfg.total_sms is not None and cfg.gemm_sms is not None
        self.cfg, self.alg, self.bufs, self.target = cfg, alg, bufs, target
        self.rank, self.world, self.heap_bases, self.device = rank, world, heap_bases, device
        self.main_programs = spec.MODES[cfg.mode].gemm_programs(cfg.total_sms, cfg.gemm_sms, world)
        # the programs that move tiles in a step (its communication programs, else its GEMM programs, which join):
        # every launch of the step cuts tickets the same way for them, since they share the tickets
        self.movers = spec.MODES[cfg.mode].comm_programs(cfg.total_sms, cfg.gemm_sms, world) or self.main_programs
        self._gemms: dict[int, StreamKGemm] = {}
        self._engine: Any = None
        self._column_words: tuple[torch.Tensor, torch.Tensor] | None = None

    # ---- the GEMM ----------------------------------------------------------------------------------------
    def choice(self, programs: int) -> GemmChoice:
        """stream_k.select's GEMM for this rank's problem on `programs` programs, with the config's choices."""
        cfg, kc = self.cfg, self.cfg.kernel
        m, n, k = self.alg.family.gemm_shape(cfg.m, cfg.n, cfg.k, self.world)
        fixed = {"config": kc, "schedule": cfg.schedule, "two_tiles": cfg.two_tiles, "sk_rounds": cfg.sk_rounds,
                 "sk_first": cfg.sk_first}
        return choose_gemm(m, n, k, cfg.datatype, programs, self.target.arch, sms=self.target.sms, fixed=fixed,
                           op_tiles=True)

    def gemm(self, programs: int) -> StreamKGemm:
        """The GEMM on `programs` programs (one workspace per program count), built for the op's target: its launch
        options (AMD's among them), XCD remap and timer are the target's, also when it is not this machine's."""
        if programs not in self._gemms:
            choice = self.choice(programs)
            self._gemms[programs] = StreamKGemm(choice.plan, self.cfg.datatype, choice.config, device=self.device,
                                                timeout_s=self.cfg.timeout_s, arch=self.target.arch)
        return self._gemms[programs]

    def gemms(self) -> list[StreamKGemm]:
        return list(self._gemms.values())

    def alone(self, programs: int, a: torch.Tensor, b: torch.Tensor, traced: bool = False) -> BoundLaunch:
        """World 1: the stand-alone GEMM kernel, A and B read where they are, C written by its epilogue, the
        epoch counted on the device (as StreamKGemm's own launches): nothing else."""
        gemm = self.gemm(programs)
        args = gemm.launch_args(a, b, self.bufs.c, gemm_trace=self.bufs.traces()[0] if traced else None)
        return BoundLaunch(streamk_gemm_kernel, gemm.plan.num_programs, {**args, "LAUNCHES": gemm.launches},
                           gemm.launch_options())

    # ---- the overlap and communication kernels -----------------------------------------------------------
    def _step(self, step_programs: int, gemm_programs: int, comm_programs: int) -> Step:
        return Step(self.bufs.ctrl, step_programs, gemm_programs, comm_programs)

    def _move(self, gemm: StreamKGemm, programs: int, claim: bool, wait_ready: bool
              ) -> tuple[Move | None, MoveFlags | None]:
        """What `programs` communication programs move after `gemm` (None for all_gather_gemm, which moves A's
        rows)."""
        alg, cfg, bufs = self.alg, self.cfg, self.bufs
        if alg.tile_fn is None:
            return None, None
        src = bufs.gemm_out
        dst = bufs.gemm_out if alg.family.b == "cols" else bufs.c
        n_cols = padded_cols(gemm.plan.N)  # the row width overlap.buffers gives both (masks of whole vectors)
        assert src.stride(1) == dst.stride(1) == 1 and min(src.stride(0), dst.stride(0)) >= n_cols
        move = Move(src, src.stride(0), src.stride(1), dst, dst.stride(0), dst.stride(1), bufs.ready, cfg.m,
                    gemm.plan.N, n_cols, gemm.plan.dp_tiles if cfg.sk_first else 0,
                    ticket_span(bufs.tiles, self.world if alg.owns_tiles else 1, gemm.plan.BLK_M // cfg.comm_tile_m,
                                self.movers))
        flags = constexprs(MoveFlags, READY_SYS=alg.ready_from_every_rank,
                           READY_SOURCES=alg.ready_sources(self.world) if wait_ready else 0,
                           CTM=cfg.comm_tile_m, CTN=cfg.comm_tile_n, CLAIM_TILES=claim, OWNED=alg.owns_tiles)
        return move, flags

    def _gather(self, a: torch.Tensor, *, in_comm: bool, in_gemm: bool, gemm_waits: bool,
                segments: bool = False) -> Gather | None:
        bufs, cfg = self.bufs, self.cfg
        if not self.alg.gathers_a:
            return None
        assert bufs.ag is not None and bufs.a_ready is not None and cfg.kernel is not None
        chunk = a_chunk_cols(cfg.k)
        assert chunk % cfg.kernel.BLK_K == 0, f"A's arrival chunks ({chunk} columns) must be whole K blocks"
        segment = a_segment_cols(cfg.k)
        k_cols = vector_cols(cfg.k, a, bufs.ag)  # a caller's A read in place may have rows of just K
        return Gather(a, a.stride(0), a.stride(1), bufs.ag, bufs.ag.stride(0), bufs.ag.stride(1), bufs.a_ready,
                      max(1, a.shape[0]), cfg.k, k_cols, chunk, segment, *(tl.constexpr(v) for v in (
                          min(cfg.kernel.BLK_M, 64), 256, in_comm, in_gemm, gemm_waits,
                          # not where the GEMM programs push first (fused_sequential: its kernel spills at world 8
                          # with the segments' loop)
                          segments and not in_gemm and segment < cfg.k, own_in_place(a, bufs.ag, self.world))))

    def overlap(self, gemm: StreamKGemm, a: torch.Tensor, b: torch.Tensor, *, step_programs: int,
                comm_programs: int = 0, join: bool = False, claim: bool = False, peer_sync: bool = True,
                traced: bool = False, wait_a: bool = True, push: bool = False, gemm_gathers: bool = False,
                counts: bool = False, a_segments: bool = True) -> BoundLaunch:
        """The overlap kernel: `gemm`'s programs, then `comm_programs` communication programs; with `join` the GEMM
        programs move tiles too once their GEMM work is done; with `push` (fused_sequential) the GEMM's epilogue
        moves each tile itself (and `gemm_gathers`: each GEMM program pushes its share of A's rows first); with
        `counts` (copy_engine) the epilogue counts finished tiles per band of tile rows instead of flagging each;
        `a_segments`: all_gather_gemm's GEMM reads K in wait segments where A arrives while it runs (overlap.
        algorithms.all_gather_gemm.a_segment_cols; not in bulk_sync, where A is there, nor in copy_engine unless it
        pushes A in chunks of columns: a_in_columns)."""
        alg, seq, bufs = self.alg, push, self.bufs
        epilogue = alg.push_epilogue if seq and alg.push_epilogue is not None else alg.epilogue
        if counts:
            epilogue = store_and_count
        gemm_a = bufs.ag if alg.gathers_a else a  # all_gather_gemm multiplies the gathered A
        # the copy engine's reduce_rows copies band by band as the GEMM finishes them: each rank starts elsewhere
        shift = (reduce_rows_shift(gemm.plan.M, gemm.plan.BLK_M, self.rank, self.world)
                 if counts and alg.copy_schedule == "reduce_rows" else 0)
        args = gemm.launch_args(gemm_a, b, bufs.gemm_out, tile_flags=bufs.counts if counts else bufs.ready,
                                gemm_trace=bufs.traces()[0] if traced else None, epilogue=epilogue,
                                heap_bases=self.heap_bases, cur_rank=self.rank, world_size=self.world,
                                row_shift=shift)
        del args["epoch"]  # the kernel reads the step's epoch from CTRL
        # the overlap kernel's GEMM keeps power-of-two tiles (its communication tiles divide them), no split-K
        tiling, schedule = unwrapped(args["TILING"]), unwrapped(args["SCHEDULE"])
        assert tiling["BLK_N1"] == 0 and args.pop("B1") is None, "the op plans power-of-two tile widths"
        assert schedule["SPLIT_K"] == 0, "the op's kernels do not run split-K"
        assert tiling["STRIDE_ALIGN"] == 1, "the op reads rows 16-element aligned (or through TMA)"
        args["CTX"] = self._context(gemm)  # the collective error words, world_size a compile-time constant
        comm = comm_programs > 0
        move, move_flags = self._move(gemm, comm_programs, claim, True) if (comm or join) else (None, None)
        gather = self._gather(a, in_comm=comm, in_gemm=gemm_gathers, gemm_waits=alg.gathers_a and wait_a,
                              segments=a_segments)
        # the GEMM's own epilogue (or its push of A's rows) writes into the peers' buffers
        pushes = seq and (alg.push_epilogue is not None or gemm_gathers)
        writes_peers_first = alg.writes_peers and not comm and pushes
        flags = constexprs(
            StepFlags, COMM=comm, PEER_SYNC=peer_sync and self.end_barrier(),
            GEMM_SYS=join or alg.gemm_writes_peers(seq, self.world),
            COMM_AFTER_GEMM=join, GEMM_WAITS_ARRIVED=writes_peers_first,
            WAITS_ARRIVED=alg.writes_peers and (comm or join),
            ANNOUNCE=alg.writes_peers and (comm or join or writes_peers_first))
        args.update(STEP=self._step(step_programs, gemm.plan.num_programs, comm_programs), STEP_FLAGS=flags,
                    MOVE=move, MOVE_FLAGS=move_flags, TILE_FN=alg.tile_fn if move is not None else None,
                    COMM_TRACE=bufs.traces()[1] if traced else None, GATHER=gather)
        return BoundLaunch(overlap_kernel, gemm.plan.num_programs + comm_programs, args, gemm.launch_options())

    def comm(self, programs: int, *, claim: bool, step_programs: int, traced: bool = False, wait_ready: bool = True,
             a: torch.Tensor | None = None) -> BoundLaunch:
        """The communication kernel on `programs` programs. wait_ready=False: the collective alone, every tile taken
        as ready; its programs then wait for every rank's arrival first whatever the algorithm (a stand-alone
        collective's start, as NCCL's and torch's have: no rank reads a peer's buffer before the peer is there)."""
        alg, bufs = self.alg, self.bufs
        g = self.gemm(self.main_programs)
        move, move_flags = self._move(g, programs, claim, wait_ready)
        gather = self._gather(bufs.a if a is None else a, in_comm=True, in_gemm=False, gemm_waits=False,
                              segments=True)  # pushed in the order a GEMM that waits by segments reads (two_streams)
        handshake = alg.writes_peers or not wait_ready
        flags = constexprs(StepFlags, COMM=True, PEER_SYNC=self.end_barrier(), GEMM_SYS=True, COMM_AFTER_GEMM=False,
                           GEMM_WAITS_ARRIVED=False, WAITS_ARRIVED=handshake,
                           ANNOUNCE=handshake)
        args = {"CTX": self._context(g), "BLK_M": g.plan.BLK_M, "BLK_N": g.plan.BLK_N, "GSIZE_M": g.plan.gsize_m,
                "STEP": self._step(step_programs, 0, programs), "STEP_FLAGS": flags, "MOVE": move,
                "MOVE_FLAGS": move_flags, "TILE_FN": alg.tile_fn if move is not None else None,
                "COMM_TRACE": bufs.traces()[1] if traced else None, "GATHER": gather}
        return BoundLaunch(comm_kernel, programs, args, {"num_warps": max(1, self.cfg.comm_threads // 32)})

    # ---- the protocol's small kernels ---------------------------------------------------------------------
    def end_barrier(self) -> bool:
        """Whether this op's steps end with the peer barrier: where its algorithm needs it (AlgorithmRecord.
        end_barrier), and where copy_engine pulls all_gather_gemm's rows from the peers' own slots (ce_pulls_a),
        which a peer's next step overwrites. Every kernel of a step agrees (the last to finish closes it)."""
        pulls = self.cfg.mode == "copy_engine" and self.alg.copy_schedule == "gather_a" and ce_pulls_a()
        return self.alg.end_barrier or pulls

    def _context(self, gemm: StreamKGemm) -> DeviceContext:
        """The device context of every kernel of a step: this rank on the heap, world_size a compile-time constant,
        the step's collective error words, and `gemm`'s clock, timer kind and spin budget."""
        return device_context(self.heap_bases, self.rank, self.world, self.bufs.errors.words, gemm.clock,
                              gemm.max_spins, gemm.timer_kind, world_constexpr=True)

    def _peers(self) -> dict[str, Any]:
        return {"CTRL": self.bufs.ctrl, "CTX": self._context(self.gemm(self.main_programs))}

    def announce(self) -> BoundLaunch:
        return BoundLaunch(announce_kernel, 1, self._peers(), {"num_warps": 1})

    def ce_start(self) -> BoundLaunch:
        fill = self.bufs.fill
        return BoundLaunch(ce_start_kernel, 1, {
            **self._peers(), "FILL": fill, "n_fill": fill.numel() if fill is not None else 0, "FILL_BLOCK": 128},
            {"num_warps": 1})

    def ce_finish(self, step_programs: int) -> BoundLaunch:
        return BoundLaunch(ce_finish_kernel, 1, {**self._peers(), "step_programs": step_programs,
                                                 "PEER_SYNC": self.end_barrier()}, {"num_warps": 1})

    # ---- copy engines and host-queued copies ---------------------------------------------------------------
    def copy_schedule(self, a: torch.Tensor, finish: BoundLaunch, wait: bool = True) -> CopySchedule:
        assert self.alg.copy_schedule is not None and self.cfg.kernel is not None
        ops = schedule_ops(self.alg.copy_schedule, self.bufs, a, self.heap_bases.tolist(), self.rank, self.world,
                           self.cfg.kernel.BLK_M, finish, wait,
                           column_words=self.column_words()[1] if self.a_in_columns() else None)
        return CopySchedule(ops, self.copy_engine())

    def a_in_columns(self) -> bool:
        """Whether the copy engine pushes all_gather_gemm's A in chunks of columns, its GEMM reading K in wait
        segments (copy_steps.gathers_a_in_columns)."""
        return self.alg.copy_schedule == "gather_a" and gathers_a_in_columns(
            self.cfg.m, self.cfg.k, self.world, spec.DATATYPES[self.cfg.datatype].bytes)

    def copy_pre(self, a: torch.Tensor) -> list[CopySchedule]:
        """The copies the schedule needs on the main stream before the step's start (copy_steps.schedule_pre_ops)."""
        assert self.alg.copy_schedule is not None
        ops = schedule_pre_ops(self.alg.copy_schedule, self.bufs, a, self.world)
        return [CopySchedule(ops, self.copy_engine())] if ops else []

    def copy_start(self, a: torch.Tensor) -> list[Any]:
        """What the schedule needs on the main stream after the step's start (ce_start) and before its GEMM:
        all_gather_gemm's own slot and its ready words (copy_steps.gather_a_own_ops; pulled, its rows are there
        already), and where A goes in chunks of columns the step's source of the peers' ready words
        (column_words_action); nothing otherwise."""
        if self.alg.copy_schedule != "gather_a":
            return []
        bufs, kc = self.bufs, self.cfg.kernel
        assert bufs.ag is not None and bufs.a_ready is not None and bufs.fill is not None and kc is not None
        own_a = bufs.ag[:bufs.ag.shape[0] // self.world] if ce_pulls_a() else a
        own = [CopySchedule(gather_a_own_ops(own_a, bufs.ag, bufs.a_ready, bufs.fill, kc.BLK_M, self.world),
                            self.copy_engine())]
        if not self.a_in_columns():
            return own
        pattern, words = self.column_words()
        return [*own, column_words_action(pattern, bufs.fill, words)]

    def column_words(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(pattern, words): the source of the peers' ready words where A goes in chunks of columns
        (copy_steps.column_word_pattern) and the buffer that holds it times the step's epoch; made at the first use."""
        if self._column_words is None:
            assert self.cfg.kernel is not None
            pattern = column_word_pattern(self.cfg.m, self.cfg.k, self.cfg.kernel.BLK_M, self.world).to(self.device)
            self._column_words = (pattern, torch.zeros_like(pattern))
        return self._column_words

    def copy_engine(self) -> Any:
        """This device's copy engine (made at the first use)."""
        if self._engine is None:
            self._engine = make_engine(self.device.type == "cuda", self.cfg.timeout_s)
        return self._engine

    def compaction(self) -> Callable[[], Any]:
        """all_scatter's wide C: each rank's padded column block of the heap buffer -> the contiguous C."""
        bufs, m, w = self.bufs, self.cfg.m, self.world
        n = bufs.gemm_out.shape[1]
        src, dst = bufs.heap_c.view(m, w, -1)[:, :, :n], bufs.c.view(m, w, n)
        return lambda: dst.copy_(src)

    def reduce_rows_post(self) -> Callable[[], None]:
        assert self.bufs.partial is not None and self.bufs.recv is not None
        return reduce_rows_post(self.bufs.c, self.bufs.partial, self.bufs.recv, self.rank, self.world)

