"""Compare a result with a float64 reference computed from the same inputs, tile by tile.

The error measure is the relative Frobenius error ||out - ref|| / ||ref||, over the whole matrix
and per GEMM tile; tolerances by input dtype follow the operands' precision (bf16 operands
land between 1e-3 and 1e-2, fp32 far under 1e-3; int8 must be exact). A failed check names the
first wrong tile in the GEMM's tile order, which points at the kernel role that produced it.
"""

from __future__ import annotations

from typing import Any

import torch

from streamk_pgas.harness.checks import TOLERANCE
from streamk_pgas.stream_k.tiles import tile_coords_host


def reference_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A @ B in float64 (exact for int8 inputs of the sizes used here)."""
    return a.double() @ b.double()


def compare_tiles(
    out: torch.Tensor,
    ref: torch.Tensor,
    datatype: str,
    BLK_M: int,
    BLK_N: int,
    GSIZE_M: int,
) -> dict[str, Any]:
    """Whole-matrix and per-tile relative error of out against ref; the first wrong tile in tile order."""
    tol = TOLERANCE[datatype]
    M, N = ref.shape
    diff = out.double() - ref
    ref_norm = torch.linalg.vector_norm(ref).item()
    rel = torch.linalg.vector_norm(diff).item() / max(ref_norm, 1e-300)
    finite = bool(torch.isfinite(out.double()).all().item())
    tm, tn = -(-M // BLK_M), -(-N // BLK_N)
    pad = (0, tn * BLK_N - N, 0, tm * BLK_M - M)
    d2 = torch.nn.functional.pad(diff.square(), pad).view(tm, BLK_M, tn, BLK_N).sum(dim=(1, 3))
    r2 = torch.nn.functional.pad(ref.square(), pad).view(tm, BLK_M, tn, BLK_N).sum(dim=(1, 3))
    nonfinite = ~torch.isfinite(torch.nn.functional.pad(out.double(), pad)).view(tm, BLK_M, tn, BLK_N)
    tile_rel = (d2.sqrt() / r2.sqrt().clamp_min(1e-300)).cpu()
    bad = (tile_rel > tol) if tol > 0 else (d2.cpu() != 0)
    bad |= nonfinite.any(dim=3).any(dim=1).cpu()
    first = None
    if bool(bad.any()):
        for tile_id in range(tm * tn):
            pm, pn = tile_coords_host(tile_id, tm, tn, GSIZE_M)
            if bool(bad[pm, pn]):
                first = {"tile": tile_id, "pid_m": pm, "pid_n": pn, "rows": [pm * BLK_M, min(M, (pm + 1) * BLK_M)],
                         "cols": [pn * BLK_N, min(N, (pn + 1) * BLK_N)], "rel_err": float(tile_rel[pm, pn])}
                break
    passed = finite and first is None and (rel <= tol if tol > 0 else rel == 0.0)
    return {
        "passed": passed,
        "nonfinite": int(nonfinite.sum()),
        "rel_err": rel,
        "max_abs_err": diff.abs().max().item() if diff.numel() else 0.0,
        "tolerance": tol,
        "wrong_tiles": int(bad.sum()),
        "first_wrong_tile": first,
    }


def nonfinite_inputs(**inputs: torch.Tensor) -> dict[str, dict[str, int]]:
    """Per input that holds NaN or Inf, how many of each: such inputs make the product itself non-finite, so the
    output cannot be judged (and the kernels are not to blame)."""
    found = {}
    for name, t in inputs.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            found[name] = {"nan": int(torch.isnan(t).sum()), "inf": int(torch.isinf(t).sum())}
    return found


def inputs_failure(found: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The validation result of non-finite inputs (nonfinite_inputs): failed, naming them."""
    return {"passed": False, "nonfinite_inputs": found, "rel_err": None, "tolerance": None, "wrong_tiles": None,
            "first_wrong_tile": None}


def describe_failure(name: str, result: dict[str, Any]) -> str:
    """One line naming what failed and where."""
    bad_inputs = result.get("nonfinite_inputs")
    if bad_inputs:
        held = "; ".join(f"{k} holds {v['nan']} NaN and {v['inf']} Inf" for k, v in bad_inputs.items())
        return f"{name}: the inputs are not finite ({held}): C = A @ B is not defined there, so it cannot be validated"
    if result.get("nonfinite"):
        t = result.get("first_wrong_tile")
        return (f"{name}: C holds {result['nonfinite']} NaN/Inf value(s) though the inputs are finite"
                + (f"; first in tile {t['tile']} (rows {t['rows']}, cols {t['cols']})" if t else ""))
    t = result.get("first_wrong_tile")
    where = (f"first wrong tile {t['tile']} (block row {t['pid_m']}, col {t['pid_n']}; rows {t['rows']}, "
             f"cols {t['cols']}; tile rel err {t['rel_err']:.3g})" if t else "no single tile stands out")
    return (f"{name}: relative error {result['rel_err']:.3g} > tolerance {result['tolerance']:g}, "
            f"{result['wrong_tiles']} wrong tile(s); {where}")
