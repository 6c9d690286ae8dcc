"""Inputs, the vendor GEMM call, and validation against a float64 product of the same inputs.

Rank r's shards come from a torch.Generator seeded `seed + 1 + r`; a matrix every rank holds
whole (A in all_gather's column-parallel sharding) comes from `seed`. Any rank can therefore
regenerate every other rank's shards, and the float64 reference of its own output is computed
from exactly the inputs the run used, on the run's device.

The error measure is the relative Frobenius error ||C - C64|| / ||C64|| (as harness/validate.py).
Tolerances by input datatype are benchmark.py's (harness.checks.TOLERANCE): bf16 2e-2, fp16 1e-2,
fp32 1e-4 (TF32 is off: torch's default for matmul), int8 exact (int32 accumulation).
"""

from __future__ import annotations

from typing import Any

import torch

from streamk_pgas.harness.checks import TOLERANCE
from streamk_pgas.harness.dtypes import random_inputs
from streamk_pgas.stream_k.dtypes import output_dtype


def generator(seed: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seed)


def rank_inputs(
    a_shape: tuple[int, int],
    b_shape: tuple[int, int],
    datatype: str,
    seed: int,
    rank: int,
    device: torch.device,
    shared_a: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s A and B on `device`; A from `seed` when every rank holds the same A.

    Both are row-major, as benchmark.py's, except int8 B on a GPU: it is stored column-major
    (K-contiguous, same values), the "TN" layout that int8 tensor-core GEMMs in cuBLASLt and
    hipBLASLt are built for.
    """
    g = generator(seed + 1 + rank)
    a = random_inputs(a_shape, datatype, generator(seed) if shared_a else g, device).contiguous()
    b = random_inputs(b_shape, datatype, g, device).contiguous()
    if b.dtype == torch.int8 and b.device.type == "cuda":
        b = b.t().contiguous().t()
    return a, b


def gemm_out(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out = a @ b with the vendor library: cuBLAS / hipBLASLt on a GPU, torch's CPU kernels on the CPU.

    int8 goes through torch._int_mm (int8 x int8 -> int32, cuBLASLt / hipBLASLt on a GPU).
    """
    if a.dtype == torch.int8:
        return torch._int_mm(a, b, out=out)
    return torch.mm(a, b, out=out)


def empty_output(shape: tuple[int, ...], datatype: str, device: torch.device) -> torch.Tensor:
    return torch.empty(shape, dtype=output_dtype(datatype), device=device)


def product64(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.double() @ b.double()


def compare(out: torch.Tensor, ref: torch.Tensor, datatype: str) -> dict[str, Any]:
    """Relative Frobenius error of out against the float64 reference, and whether it is within tolerance."""
    tol = TOLERANCE[datatype]
    got = out.double()
    diff = got - ref
    ref_norm = torch.linalg.vector_norm(ref).item()
    rel = torch.linalg.vector_norm(diff).item() / max(ref_norm, 1e-300)
    finite = bool(torch.isfinite(got).all().item())
    passed = finite and (rel <= tol if tol > 0 else bool((diff == 0).all().item()))
    return {
        "passed": passed,
        "rel_err": rel,
        "max_abs_err": diff.abs().max().item() if diff.numel() else 0.0,
        "max_abs_ref": ref.abs().max().item() if ref.numel() else 0.0,
        "finite": finite,
        "tolerance": tol,
    }
