"""The baselines of reference/ (vendor libraries and torch), each in one family of spec.sharding: the baselines
of a family are the equal-output peers of its algorithms, and the family's vendor pair (the library GEMM and
collective run back to back) is what speed-ups are measured against."""

from __future__ import annotations

from dataclasses import dataclass

from streamk_pgas.spec.sharding import FAMILIES, Family


@dataclass(frozen=True)
class Baseline:
    key: str  # reference/'s variant name
    family: Family
    collective: str  # the run log's "algorithm" of its records
    vendor_pair: bool  # the library GEMM + collective of its family
    text: str


BASELINES: dict[str, Baseline] = {b.key: b for b in (
    Baseline("all_reduce", FAMILIES["reduce"], "all_reduce", True,
             "vendor GEMM of the local K slice, then all_reduce of the M x N partial (NCCL/RCCL/gloo)"),
    Baseline("symm_mem_one_shot", FAMILIES["reduce"], "all_reduce", False,
             "GEMM into a torch symmetric-memory buffer, then symm_mem.one_shot_all_reduce_out"),
    Baseline("symm_mem_two_shot", FAMILIES["reduce"], "all_reduce", False,
             "GEMM into a torch symmetric-memory buffer, then symm_mem.two_shot_all_reduce_"),
    Baseline("all_gather", FAMILIES["gather"], "all_gather", True,
             "vendor GEMM of the local N/W columns, then all_gather_into_tensor into M x N"),
    Baseline("gemm", FAMILIES["gemm"], "gemm", True,
             "the whole M x N x K GEMM on one GPU (every rank runs its own copy at once)"),
    Baseline("fused_all_gather_matmul", FAMILIES["ag_gemm"], "all_gather", False,
             "torch symm_mem.fused_all_gather_matmul: A row-sharded, all-gathered while multiplied"),
    Baseline("all_gather_then_gemm", FAMILIES["ag_gemm"], "all_gather_gemm", True,
             "all_gather_into_tensor of the A row shards, then the vendor GEMM (all_gather_gemm's peer)"),
    Baseline("fused_matmul_reduce_scatter", FAMILIES["gemm_rs"], "reduce_scatter", False,
             "torch symm_mem.fused_matmul_reduce_scatter: K split, result reduce-scattered by rows"),
    Baseline("gemm_then_reduce_scatter", FAMILIES["gemm_rs"], "gemm_reduce_scatter", True,
             "vendor GEMM of the local K slice, then reduce_scatter_tensor of the M x N partial by rows "
             "(gemm_reduce_scatter's peer)"),
)}


def baseline(key: str) -> Baseline:
    if key not in BASELINES:
        raise ValueError(f"baseline must be one of {', '.join(BASELINES)}; got {key!r}")
    return BASELINES[key]


def peers(family: str) -> tuple[str, ...]:
    """The baselines that end with the family's output: the equal-output peers of its algorithms."""
    return tuple(b.key for b in BASELINES.values() if b.family.name == family)


def vendor_pair(family: str) -> Baseline | None:
    """The family's library GEMM + collective (None for a family without one)."""
    return next((b for b in BASELINES.values() if b.family.name == family and b.vendor_pair), None)
