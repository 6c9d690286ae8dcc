"""How each algorithm of spec.sharding is carried out on the device, in one record each (in the spirit of
nccl-tests' one struct per collective): which epilogue the GEMM runs, which tile kernel moves a tile, how a
tile's readiness is told, what the communication must do before it writes to a peer, and which copy schedule
mode copy_engine runs. The sharding itself (each rank's shards, its output, the bytes moved, the modes built
for it) is the algorithm's spec record (`Algorithm.spec`). Nothing else in the op branches on an algorithm's
name.

Buffers (H: on the heap, reached by peers):
    all_scatter  C [M, N] (H); the GEMM writes C[:, r*N/W:(r+1)*N/W]; tiles are copied to every peer's C.
    all_reduce   partial [M, N] (H); C [M, N] (H), zeroed each step by the communication programs as they
                 start (by the host in fused_sequential); tiles atomically added into every rank's C.
    one_shot     partial [M, N] (H), read by every peer; C [M, N] (this rank's result).
    all_gather_gemm      AG [M, K] (H), the gathered A (rank-rotated, see communication/all_gather.py);
                         C [M, N/W], this rank's columns, written by the GEMM; nothing moves C.
    gemm_reduce_scatter  partial [M, N]; C [M/W, N] (H), this rank's rows of the sum, zeroed each step as for
                         all_reduce; each partial tile is atomically added into the owning rank's rows.
                         copy_engine: the partial's rows go to their owner's RECV [W, M/W, N] (H), slot = sender,
                         and C = own rows + the other slots, added after the step's copies.
With one rank there is nothing to move: every algorithm's GEMM writes C itself (overlap.modes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import spec
from overlap.communication.all_gather import gathered_store_epilogue
from overlap.communication.all_reduce import all_reduce_push_epilogue, all_reduce_tile
from overlap.communication.all_scatter import all_scatter_push_epilogue, all_scatter_tile
from overlap.communication.one_shot import one_shot_publish_epilogue, one_shot_tile, sub_tile_rows
from overlap.communication.reduce_scatter import reduce_scatter_push_epilogue, reduce_scatter_tile
from stream_k.kernel import store_and_signal


@dataclass(frozen=True)
class Algorithm:
    spec: spec.Algorithm
    tile_fn: Any  # moves one finished tile (None: the algorithm moves A's rows, not C's tiles)
    epilogue: Any  # the GEMM epilogue when communication tiles move the data
    push_epilogue: Any | None  # fused_sequential's epilogue, which moves the tile itself (None: as epilogue)
    ready_from_every_rank: bool  # a tile is ready once every rank produced it (one_shot) / this rank's GEMM did
    writes_peers: bool  # writes into the peers' buffers, so it waits for their arrival at the step
    zeroes_c: bool  # C must be zeroed every step before any rank adds into it (atomic reductions)
    partial_buffer: bool  # the GEMM writes a partial M x N buffer, not (a slice of) C
    # mode copy_engine's schedule (overlap.copy_steps): "scatter" C's columns to every peer, "reduce_rows" (send
    # each owner its rows of the partial, add what arrives), "gather_a" (A's rows to every peer)
    copy_schedule: str | None = None
    # the rows of the communication sub-tile for (the GEMM tile's BLK_M, world size) when not given (None: BLK_M,
    # the whole tile); its columns are the tile's
    comm_tile_rows: Callable[[int, int], int] | None = None

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

    def ready_sources(self, world: int) -> int:
        return world if self.ready_from_every_rank else 1

    def gemm_writes_peers(self, sequential: bool, world: int) -> bool:
        """Whether the GEMM programs themselves write to peers (so they finish with a system-scope release)."""
        return world > 1 and (self.ready_from_every_rank
                              or (sequential and (self.push_epilogue is not None or self.gathers_a)))


_S = spec.ALGORITHMS
ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm(_S["all_reduce"], all_reduce_tile, store_and_signal, all_reduce_push_epilogue,
              ready_from_every_rank=False, writes_peers=True, zeroes_c=True, partial_buffer=True),
    Algorithm(_S["all_scatter"], all_scatter_tile, store_and_signal, all_scatter_push_epilogue,
              ready_from_every_rank=False, writes_peers=True, zeroes_c=False, partial_buffer=False,
              copy_schedule="scatter"),
    Algorithm(_S["one_shot"], one_shot_tile, one_shot_publish_epilogue, None,
              ready_from_every_rank=True, writes_peers=False, zeroes_c=False, partial_buffer=True,
              comm_tile_rows=sub_tile_rows),
    Algorithm(_S["all_gather_gemm"], None, gathered_store_epilogue, None,
              ready_from_every_rank=False, writes_peers=True, zeroes_c=False, partial_buffer=False,
              copy_schedule="gather_a"),
    Algorithm(_S["gemm_reduce_scatter"], reduce_scatter_tile, store_and_signal, reduce_scatter_push_epilogue,
              ready_from_every_rank=False, writes_peers=True, zeroes_c=True, partial_buffer=True,
              copy_schedule="reduce_rows"),
)}
assert set(ALGORITHMS) == set(spec.ALGORITHMS)
assert all((a.copy_schedule is not None) == a.spec.has_mode("copy_engine") for a in ALGORITHMS.values())
