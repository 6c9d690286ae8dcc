"""Datatype names (spec.DATATYPES) as torch dtypes: the inputs', C's (int8 products are stored as int32) and the
GEMM accumulator's (int32 for int8, else fp32), each read from spec's record. torch and spec only: the vendor
baselines (reference/) use it without the Triton stack (stream_k's package loads its other modules when first
used)."""

from __future__ import annotations

import torch

from streamk_pgas import spec

TORCH_DTYPES: dict[str, torch.dtype] = {name: getattr(torch, d.torch_name) for name, d in spec.DATATYPES.items()}


def torch_dtype(name: str) -> torch.dtype:
    """The inputs' torch dtype of a datatype name; ValueError naming the valid ones."""
    return TORCH_DTYPES[spec.datatype(name).name]


def output_dtype(name: str) -> torch.dtype:
    """C's dtype: int8 products accumulate and are stored as int32; floats keep their type."""
    return getattr(torch, spec.datatype(name).output_torch_name)


def accumulator_dtype(name: str) -> torch.dtype:
    """What the GEMM sums products in: int32 for int8 inputs, fp32 for floats."""
    return getattr(torch, spec.datatype(name).accumulator_torch_name)
