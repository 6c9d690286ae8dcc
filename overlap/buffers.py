"""Every tensor one op owns: its inputs, C, the heap buffers the peers reach, the flags and counters of the step
protocol. `OpBuffers.allocate` makes them (every rank the same sequence on the symmetric heap, so offsets match);
`heap_bytes` is what that takes, for sizing the heap first.

Row layout: a buffer whose row length is not a multiple of 16 elements gets a padded row stride
(stream_k.layout.padded_cols), so that TMA descriptors and vector loads stay legal: `a`, `b` and C are then views
with stride(0) > shape[1]. all_scatter on several ranks with N/W not a multiple of 16 gives each rank's columns
a padded block in a wider heap buffer (`heap_c`, "wide C") and copies them into a contiguous `c` at the end of
the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from streamk_pgas.iris_ops import ERROR_WORDS, ErrorState, Iris
from streamk_pgas.overlap.algorithms import AlgorithmRecord
from streamk_pgas.overlap.algorithms.all_gather_gemm import a_chunks, a_ready_words
from streamk_pgas.overlap.bands import row_bands
from streamk_pgas.overlap.communication.copy_engine import band_counts
from streamk_pgas.overlap.kernels import EPOCH, control_words
from streamk_pgas.spec import DATATYPES
from streamk_pgas.stream_k.layout import padded_cols, padded_zeros
from streamk_pgas.stream_k.tiles import num_tiles

_ALIGN = 1024


def c_layout(alg: AlgorithmRecord, m: int, n: int, world: int) -> tuple[int, int, int]:
    """(rows, columns of the heap buffer that holds C, column block of each rank in it): all_scatter on several
    ranks whose N/W is not a multiple of 16 gets one padded block per rank ("wide C"); otherwise C's row stride
    is padded."""
    fam = alg.family
    local_n = fam.gemm_shape(m, n, 1, world)[1]
    if world > 1 and fam.output == "full" and fam.b == "cols" and padded_cols(local_n) != local_n:
        return m, world * padded_cols(local_n), padded_cols(local_n)
    rows, cols = fam.c_shape(m, n, world)
    return rows, padded_cols(cols), local_n


def _up(x: int) -> int:
    return max(_ALIGN, -(-x // _ALIGN) * _ALIGN)


def heap_bytes(alg: AlgorithmRecord, m: int, n: int, k: int, datatype: str, world: int, blk_m: int, blk_n: int,
               copy_engine: bool) -> int:
    """Bytes of symmetric heap one op allocates on each rank (OpBuffers.allocate's heap tensors)."""
    dt = DATATYPES[datatype]
    out = dt.output_bytes
    local_n = alg.family.gemm_shape(m, n, k, world)[1]
    tiles = num_tiles(m, local_n, blk_m, blk_n)
    rows, c_cols, _ = c_layout(alg, m, n, world)
    total = (_up(rows * c_cols * out) + _up(tiles * alg.ready_sources(world) * 4) + _up(control_words(world) * 4)
             + _up(ERROR_WORDS * 4))
    if copy_engine and alg.copy_schedule == "reduce_rows":  # RECV: a slot per sender
        total += _up(m * padded_cols(n) * out)
    if alg.gathers_a:  # the gathered A and its row-ready words
        total += _up(m * padded_cols(k) * dt.bytes) + _up(a_ready_words(m, k, blk_m, world) * 4)
    return total + (_up(alg.partial_planes * m * padded_cols(n) * out) if alg.partial_buffer else 0)


@dataclass
class OpBuffers:
    """The op's tensors. `a`, `b`: this rank's own input buffers (plain device memory, rows padded); `c`: its
    output; `gemm_out`: what the GEMM writes when there are peers (C, a column block of the heap's C, or the
    partial); the rest as overlap.algorithms and overlap.kernels describe them (None where unused)."""

    a: torch.Tensor  # all_gather_gemm: slot 0 of `ag` (on the heap)
    b: torch.Tensor
    heap_c: torch.Tensor  # C's storage on the heap, or the wide C of unaligned all_scatter
    c: torch.Tensor
    wide_c: bool
    partial_planes: tuple[torch.Tensor, ...]  # each plane of the partial (AlgorithmRecord.partial_planes; () if none)
    gemm_out: torch.Tensor
    ready: torch.Tensor
    ctrl: torch.Tensor
    errors: ErrorState  # the step's collective error words (on the heap): every kernel of a step records there
    ag: torch.Tensor | None  # all_gather_gemm's gathered A and its row-ready words
    a_ready: torch.Tensor | None
    counts: torch.Tensor | None  # copy_engine: band map + finished tiles per band of tile rows
    counts_init: torch.Tensor | None
    recv: torch.Tensor | None  # copy_engine gemm_reduce_scatter: a slot per sender
    fill: torch.Tensor | None  # copy_engine all_gather_gemm: the step's epoch, copied into A_READY words
    tiles: int  # GEMM tiles of this rank
    tiles_per_row: int
    gemm_trace: torch.Tensor | None = None  # per-tile timestamps of a traced step (made at the first)
    comm_trace: torch.Tensor | None = None

    @classmethod
    def allocate(cls, alg: AlgorithmRecord, m: int, n: int, k: int, datatype: str, world: int, rank: int,
                 blk_m: int, blk_n: int, copy_engine: bool, shmem: Iris, device: torch.device,
                 dtype: torch.dtype, out_dtype: torch.dtype) -> OpBuffers:
        need = heap_bytes(alg, m, n, k, datatype, world, blk_m, blk_n, copy_engine)
        free = shmem.free_bytes
        if need > free:
            raise MemoryError(f"OverlapOp needs {need} B of symmetric heap per rank; {free} B are free")
        fam = alg.family
        (am, ak), (bk, bn) = fam.a_shape(m, k, world), fam.b_shape(k, n, world)
        # all_gather_gemm: the own A is slot 0 of the gathered A (rows 0 .. M/W - 1 on this rank), so a step on it
        # copies nothing into slot 0 (overlap.copy_steps.own_in_place)
        ag = shmem.zeros(m, padded_cols(k), dtype=dtype)[:, :k] if alg.gathers_a else None
        a = ag[:am] if ag is not None else padded_zeros(am, ak, dtype, device)
        b = padded_zeros(bk, bn, dtype, device)
        rows, c_cols, block = c_layout(alg, m, n, world)
        local_n = bn
        heap_c = shmem.zeros(rows, c_cols, dtype=out_dtype)
        wide = block != local_n
        c_width = fam.c_shape(m, n, world)[1]
        c = torch.zeros((m, n), dtype=out_dtype, device=device) if wide else heap_c[:, :c_width]
        planes = alg.partial_planes if alg.partial_buffer else 0
        store = shmem.zeros(planes * m, padded_cols(n), dtype=out_dtype) if planes else None
        partial_planes = tuple(store[i * m:(i + 1) * m, :n] for i in range(planes)) if store is not None else ()
        partial = partial_planes[0] if partial_planes else None
        tiles = num_tiles(m, local_n, blk_m, blk_n)
        ready = shmem.zeros(tiles * alg.ready_sources(world), dtype=torch.int32)
        ctrl = shmem.zeros(control_words(world), dtype=torch.int32)
        a_ready = shmem.zeros(a_ready_words(m, k, blk_m, world), dtype=torch.int32) if alg.gathers_a else None
        if fam.output == "cols":
            gemm_out = c
        elif fam.b == "cols":
            gemm_out = heap_c[:, rank * block:rank * block + local_n]
        else:
            assert partial is not None
            gemm_out = partial
        n_rb = -(-m // blk_m)
        kind = alg.copy_schedule if copy_engine else None
        # the band map, then the band counts (copy_engine.band_counts); as long as the tile flags at least, which
        # the GEMM's checks ask of its flags
        counts_init = (torch.tensor(band_counts(row_bands(kind, n_rb, world), n_rb, max(2 * n_rb, tiles)),
                                    dtype=torch.int32) if kind in ("scatter", "reduce_rows") else None)
        counts = counts_init.to(device) if counts_init is not None else None
        recv = (shmem.zeros(world, m // world, padded_cols(n), dtype=out_dtype)[:, :, :n] if kind == "reduce_rows"
                else None)
        fill = torch.zeros(n_rb * a_chunks(k), dtype=torch.int32, device=device) if kind == "gather_a" else None
        errors = ErrorState(shmem)
        return cls(a, b, heap_c, c, wide, partial_planes, gemm_out, ready, ctrl, errors, ag, a_ready, counts,
                   counts_init, recv, fill, tiles, -(-local_n // blk_n))

    @property
    def partial(self) -> torch.Tensor | None:
        """The partial's first plane (the GEMM's launch takes it; the kernels pick the step's), None if none."""
        return self.partial_planes[0] if self.partial_planes else None

    def gemm_result(self) -> torch.Tensor:
        """What the GEMM wrote in the last finished step: gemm_out, or the partial's plane of that step's epoch
        (reads the epoch from the device)."""
        if len(self.partial_planes) < 2 or self.gemm_out is not self.partial:
            return self.gemm_out
        return self.partial_planes[int(self.ctrl[EPOCH].item()) % len(self.partial_planes)]

    def traces(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(GEMM trace [tiles, 3], communication trace [tiles, 5]) int64, made at the first traced step."""
        if self.gemm_trace is None or self.comm_trace is None:
            self.gemm_trace = torch.zeros(self.tiles, 3, dtype=torch.int64, device=self.c.device)
            self.comm_trace = torch.zeros(self.tiles, 5, dtype=torch.int64, device=self.c.device)
        return self.gemm_trace, self.comm_trace

    def reset(self, extra: list[Any]) -> None:
        """Zero the step protocol's words and the error words (and `extra`, e.g. the GEMMs' locks), the counts back
        to their map."""
        for t in (self.ctrl, self.ready, *([self.a_ready] if self.a_ready is not None else []), *extra):
            t.zero_()
        self.errors.clear()
        if self.counts is not None and self.counts_init is not None:
            self.counts.copy_(self.counts_init)
