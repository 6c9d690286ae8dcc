"""What differs between the algorithms, in one record each (in the spirit of nccl-tests' one struct per
collective): how A and B are split, which epilogue the GEMM runs, which tile kernel moves a tile, how
a tile's readiness is told, and what the communication must do before it writes to a peer. Nothing
else in the op branches on an algorithm's name.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from overlap.communication.all_gather import gathered_store_epilogue, no_tile
from overlap.communication.all_reduce import all_reduce_push_epilogue, all_reduce_tile
from overlap.communication.all_scatter import all_scatter_push_epilogue, all_scatter_tile
from overlap.communication.one_shot import one_shot_publish_epilogue, one_shot_tile
from overlap.communication.reduce_scatter import reduce_scatter_push_epilogue, reduce_scatter_tile
from stream_k.kernel import store_and_signal


@dataclass(frozen=True)
class Algorithm:
    name: str
    split: str  # "k": A column-, B row-sharded, each rank a full partial; "n": B column-sharded
    tile_fn: Any  # moves one finished tile (iris_ops.*_tile)
    epilogue: Any  # the GEMM epilogue when communication tiles move the data
    push_epilogue: Any | None  # fused_sequential's epilogue, which moves the tile itself (None: as epilogue)
    ready_from_every_rank: bool  # a tile is ready once every rank produced it (one_shot) / this rank's GEMM did
    writes_peers: bool  # writes into the peers' C, so it waits for their arrival at the step
    zeroes_c: bool  # C must be zeroed every step before any rank adds into it
    partial_buffer: bool  # the GEMM writes a partial M x N buffer, not (a slice of) C
    output: str = "full"  # what C is on each rank: "full" M x N; "cols" M x N/W (its columns); "rows" M/W x N
    gathers_a: bool = False  # A is row-sharded (M/W x K); the communication gathers it, the GEMM waits on its rows
    # mode copy_engine's schedule (overlap.copy_steps): "scatter" C's columns to every peer, "reduce_rows" (send
    # each owner its rows of the partial, add what arrives), "gather_a" (A's rows to every peer); None: no such mode
    copy_schedule: str | None = None

    def local_k(self, k: int, world: int) -> int:
        return k // world if self.split == "k" else k

    def local_m(self, m: int, world: int) -> int:
        """Rows of this rank's A."""
        return m // world if self.gathers_a else m

    def splits_m(self) -> bool:
        """Whether M is split over the ranks (A's rows or C's rows), so it must be a multiple of W."""
        return self.gathers_a or self.output == "rows"

    def c_shape(self, m: int, n: int, world: int) -> tuple[int, int]:
        """Shape of C, the op's output on each rank."""
        if self.output == "rows":
            return m // world, n
        if self.output == "cols":
            return m, n // world
        return m, n

    def shard_of(self, full: Any, rank: int, world: int) -> Any:
        """This rank's part of the whole product `full` (M x N): what its C must hold."""
        rows, cols = self.c_shape(full.shape[0], full.shape[1], world)
        if self.output == "rows":
            return full[rank * rows:(rank + 1) * rows, :]
        if self.output == "cols":
            return full[:, rank * cols:(rank + 1) * cols]
        return full

    def local_n(self, n: int, world: int) -> int:
        return n // world if self.split == "n" else n

    def ready_sources(self, world: int) -> int:
        return world if self.ready_from_every_rank else 1

    def gemm_writes_peers(self, sequential: bool, world: int) -> bool:
        """Whether the GEMM programs themselves write to peers (so they finish with a system-scope release)."""
        return world > 1 and (self.ready_from_every_rank
                              or (sequential and (self.push_epilogue is not None or self.gathers_a)))


ALGORITHMS: dict[str, Algorithm] = {
    "all_reduce": Algorithm("all_reduce", "k", all_reduce_tile, store_and_signal, all_reduce_push_epilogue,
                            ready_from_every_rank=False, writes_peers=True, zeroes_c=True, partial_buffer=True),
    "all_scatter": Algorithm("all_scatter", "n", all_scatter_tile, store_and_signal, all_scatter_push_epilogue,
                             ready_from_every_rank=False, writes_peers=True, zeroes_c=False, partial_buffer=False,
                             copy_schedule="scatter"),
    "one_shot": Algorithm("one_shot", "k", one_shot_tile, one_shot_publish_epilogue, None,
                          ready_from_every_rank=True, writes_peers=False, zeroes_c=False, partial_buffer=True),
    "all_gather_gemm": Algorithm("all_gather_gemm", "n", no_tile, gathered_store_epilogue, None,
                                 ready_from_every_rank=False, writes_peers=True, zeroes_c=False,
                                 partial_buffer=False, output="cols", gathers_a=True,
                                 copy_schedule="gather_a"),
    "gemm_reduce_scatter": Algorithm("gemm_reduce_scatter", "k", reduce_scatter_tile, store_and_signal,
                                     reduce_scatter_push_epilogue, ready_from_every_rank=False, writes_peers=True,
                                     zeroes_c=True, partial_buffer=True, output="rows",
                                     copy_schedule="reduce_rows"),
}
