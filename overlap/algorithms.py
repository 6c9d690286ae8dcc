"""What differs between the algorithms, in one record each (in the spirit of nccl-tests' one struct per
collective): how A and B are split, which epilogue the GEMM runs, which tile kernel moves a tile, how
a tile's readiness is told, and what the communication must do before it writes to a peer. Nothing
else in the op branches on an algorithm's name.

Buffers (H: on the heap, reached by peers):
    all_scatter  C [M, N] (H); the GEMM writes C[:, r*N/W:(r+1)*N/W]; tiles are copied to every peer's C.
    all_reduce   partial [M, N] (H); C [M, N] (H), zeroed each step by the communication programs as they
                 start (by the host in fused_sequential); tiles atomically added into every rank's C.
    one_shot     partial [M, N] (H), read by every peer; C [M, N] (this rank's result).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from overlap.communication.all_reduce import all_reduce_push_epilogue, all_reduce_tile
from overlap.communication.all_scatter import all_scatter_push_epilogue, all_scatter_tile
from overlap.communication.one_shot import one_shot_publish_epilogue, one_shot_tile
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

    def local_k(self, k: int, world: int) -> int:
        return k // world if self.split == "k" else k

    def local_n(self, n: int, world: int) -> int:
        return n // world if self.split == "n" else n

    def ready_sources(self, world: int) -> int:
        return world if self.ready_from_every_rank else 1

    def gemm_writes_peers(self, sequential: bool, world: int) -> bool:
        """Whether the GEMM programs themselves write to peers (so they finish with a system-scope release)."""
        return world > 1 and (self.ready_from_every_rank or (sequential and self.push_epilogue is not None))


ALGORITHMS: dict[str, Algorithm] = {
    "all_reduce": Algorithm("all_reduce", "k", all_reduce_tile, store_and_signal, all_reduce_push_epilogue,
                            ready_from_every_rank=False, writes_peers=True, zeroes_c=True, partial_buffer=True),
    "all_scatter": Algorithm("all_scatter", "n", all_scatter_tile, store_and_signal, all_scatter_push_epilogue,
                             ready_from_every_rank=False, writes_peers=True, zeroes_c=False, partial_buffer=False),
    "one_shot": Algorithm("one_shot", "k", one_shot_tile, one_shot_publish_epilogue, None,
                          ready_from_every_rank=True, writes_peers=False, zeroes_c=False, partial_buffer=True),
}
