"""How each algorithm of spec.sharding is carried out on the device: one module per algorithm, each holding its
tile mover, its GEMM epilogues, its buffers' description and its record (overlap.algorithms.record: readiness,
ownership, copy schedule, communication sub-tile, rates for the planner). The modes, the buffers, the planner
and the kernels read the records in `ALGORITHMS`; nothing else branches on an algorithm's name.

    all_reduce           reduce-scatter + all-gather tile by tile: each tile's owner sums every rank's partial in
                         rank order and stores the sum into every rank's C (plain loads and stores)
    one_shot             every rank sums every rank's partial of each tile (one phase: the latency algorithm)
    all_scatter          each rank's columns of C stored into every rank's C
    all_gather_gemm      A's row shards pushed to every rank while the GEMM multiplies the rows that have arrived
    gemm_reduce_scatter  all_reduce's reduce-scatter: each tile's owner sums every rank's partial in rank order and
                         stores each row of the sum into the C of the rank that holds the row

With one rank there is nothing to move: every algorithm's GEMM writes C itself (overlap.modes).
"""

from __future__ import annotations

from streamk_pgas import spec
from streamk_pgas.overlap.algorithms import all_gather_gemm, all_reduce, all_scatter, gemm_reduce_scatter, one_shot
from streamk_pgas.overlap.algorithms.record import AlgorithmRecord, Rates

ALGORITHMS: dict[str, AlgorithmRecord] = {m.RECORD.name: m.RECORD for m in (
    all_reduce, all_scatter, one_shot, all_gather_gemm, gemm_reduce_scatter)}
assert set(ALGORITHMS) == set(spec.ALGORITHMS)
assert all((a.copy_schedule is not None) == a.spec.has_mode("copy_engine") for a in ALGORITHMS.values())

__all__ = ["ALGORITHMS", "AlgorithmRecord", "Rates"]
