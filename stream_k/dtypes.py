"""Datatype names used on the command line, and what each computes in (the GEMM's own table;
harness.dtypes adds random inputs on top)."""

from __future__ import annotations

import torch

DATATYPES: dict[str, torch.dtype] = {
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp32": torch.float32,
    "int8": torch.int8,
}


def torch_dtype(name: str) -> torch.dtype:
    if name not in DATATYPES:
        raise ValueError(f"--datatype must be one of {', '.join(DATATYPES)}; got {name!r}")
    return DATATYPES[name]


def output_dtype(name: str) -> torch.dtype:
    """C's dtype: int8 products accumulate and are stored as int32; floats keep their type."""
    return torch.int32 if name == "int8" else torch_dtype(name)
