"""The record every algorithm module fills (in the spirit of nccl-tests' one struct per collective): which epilogue
the GEMM runs, which tile kernel moves a tile, how a tile's readiness is told and who moves it, what the
communication must do before it writes to a peer, which copy schedule mode copy_engine runs, its communication
sub-tile and the rates the planner's cost model uses for it. The sharding itself (each rank's shards, its output,
the bytes moved, the modes built for it) is the algorithm's spec record (`AlgorithmRecord.spec`). Nothing else in the op
branches on an algorithm's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamk_pgas import spec

# What a GEMM epilogue that releases every finished tile at system scope (to its owner, or to the copy engine's
# count) adds to each wave of tiles: gemm_reduce_scatter's GEMM alone at W = 4 on 84 and 100 programs, 1024 and
# 2048 x 8192 x 8192, ran 16-35 us over the GEMM model, 4.5-5.8 us per wave (results/logs/h100x4/calib-4b169d9)
SYS_RELEASE_US = 5.0
# The same count at GPU scope (copy_engine's store_and_count, read by this GPU's stream wait and copy engine): the
# GEMM kernel of gemm_reduce_scatter's copy_engine ran 1.8-2.2 us a wave faster than with the system-scope count at
# 8192^3, 16384 x 8192 x 8192 and 4096 x 57344 x 8192, W = 4 (results/logs/h100x4/ce-bc5a272)
GPU_RELEASE_US = 3.0


@dataclass(frozen=True)
class Rates:
    """What the planner's cost model (overlap.rates, overlap.modes) assumes of an algorithm's communication: GB/s
    one communication program moves, the ceiling per rank (one direction of its links), the same work done from a
    GEMM program's epilogue (fused_sequential push epilogues; None: the algorithm has none), and the share of the
    per-program rate left inside the fused kernel (its programs run with the GEMM's warps and registers), the share of
    its time the GEMM loses beside them in that kernel, and what
    the GEMM's epilogue adds to each wave of tiles where it releases every finished tile to a peer (microseconds)."""

    per_program_gbs: float
    link_gbs: float
    epilogue_gbs: float | None = None
    fused_efficiency: float = 1.0
    fused_gemm_cost: float = 0.0  # the share of its time the GEMM loses in the fused kernel beside these programs
    signal_us: float = 0.0
    # (world size, GB/s) where one program's rate differs from per_program_gbs at that world size
    per_program_at: tuple[tuple[int, float], ...] = ()
    switch_link_gbs: float | None = None  # the ceiling at W > 2, where it differs (None: link_gbs)

    def per_program(self, world: int) -> float:
        """GB/s one communication program moves at this world size."""
        return dict(self.per_program_at).get(world, self.per_program_gbs)

    def link(self, world: int) -> float:
        """The ceiling per rank at this world size."""
        return self.switch_link_gbs if world > 2 and self.switch_link_gbs is not None else self.link_gbs


def reduce_elements_in_flight(world_size: int) -> int:
    """Elements a reduction keeps in flight over its W loads of one sub-tile: what fits beside the fp32 sum in the
    registers with no spill on sm_90 (tools.compile_check): 16 K (32 KiB of bf16) up to 4 ranks, 8 K beyond (16 K
    spilled the separate communication kernel at W = 8, 32 K the fused kernel at W = 2)."""
    return 16384 if world_size <= 4 else 8192


def rows_for_loads_in_flight(blk_m: int, blk_n: int, world_size: int) -> int:
    """Sub-tile rows of a reduction that loads every rank's copy of a sub-tile at once (overlap.communication.
    comm_loop.rank_order_sum): reduce_elements_in_flight over the W loads (16 x 256 at W = 4), a power of two, at
    most the whole tile."""
    rows = max(1, (reduce_elements_in_flight(world_size) // max(1, world_size)) // blk_n)
    rows = 1 << (rows.bit_length() - 1)  # a power of two (it divides the tile)
    return min(blk_m, rows)


@dataclass(frozen=True)
class AlgorithmRecord:
    spec: spec.Algorithm
    tile_fn: Any  # moves one finished tile (None: the algorithm moves A's rows, not C's tiles)
    epilogue: Any  # the GEMM epilogue when communication tiles move the data
    push_epilogue: Any | None  # fused_sequential's epilogue, which moves the tile itself (None: as epilogue)
    ready_from_every_rank: bool  # a tile is ready once every rank produced it / once this rank's GEMM did
    writes_peers: bool  # writes into the peers' buffers, so it waits for their arrival at the step
    partial_buffer: bool  # the GEMM writes a partial M x N buffer, not (a slice of) C
    rates: Rates
    # tile t is moved by its owner, rank t % W, alone (overlap.communication.comm_loop: OWNED)
    owns_tiles: bool = False
    # mode copy_engine's schedule (overlap.copy_steps): "scatter" C's columns to every peer, "reduce_rows" (send
    # each owner its rows of the partial, add what arrives), "gather_a" (A's rows to every peer)
    copy_schedule: str | None = None
    # the rows of the communication sub-tile for (the GEMM tile's BLK_M, BLK_N, world size) when not given (None:
    # BLK_M, the whole tile); its columns are the tile's
    comm_tile_rows: Callable[[int, int, int], int] | None = None
    # planes of the partial, one under the other: step e writes and reads plane e % planes (two: the step ends
    # without the peer barrier, see end_barrier)
    partial_planes: int = 1
    # every write into a peer's buffer is followed by a ready word that the peer waits for before it reads what was
    # written (all_gather_gemm's rows of A): the peer's step is complete without the end-of-step barrier
    flags_every_write: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def family(self) -> spec.Family:
        return self.spec.family

    @property
    def gathers_a(self) -> bool:
        """A is row-sharded: the communication gathers it, the GEMM waits on its rows."""
        return self.family.a == "rows"

    @property
    def end_barrier(self) -> bool:
        """Whether a step ends with the peer barrier (overlap.kernels: PEER_SYNC): where it writes into the peers'
        buffers without a ready word they wait for (their C is final only once every write has landed), or where a
        peer may still read this rank's partial when the next step's GEMM overwrites it (one plane). one_shot (no
        writes, two planes) and all_gather_gemm (flagged writes, no partial) need none: their modules say why."""
        return (self.writes_peers and not self.flags_every_write) or (self.partial_buffer and self.partial_planes < 2)

    def ready_sources(self, world: int) -> int:
        return world if self.ready_from_every_rank else 1

    def gemm_writes_peers(self, sequential: bool, world: int) -> bool:
        """Whether the GEMM programs themselves write to peers (so they finish with a system-scope release)."""
        return world > 1 and (self.ready_from_every_rank
                              or (sequential and (self.push_epilogue is not None or self.gathers_a)))
