"""Datatype names used on the command line, and what each computes in."""

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


def random_inputs(shape: tuple[int, ...], name: str, generator: torch.Generator, device: torch.device | str):
    """Random data (never zeros): int8 in [-8, 8), floats ~ N(0, 1). Drawn where the generator lives (a
    device generator draws large inputs on the GPU), then moved to `device`."""
    dtype = torch_dtype(name)
    if dtype == torch.int8:
        t = torch.randint(-8, 8, shape, generator=generator, dtype=torch.int8, device=generator.device)
    else:
        t = torch.randn(shape, generator=generator, dtype=torch.float32, device=generator.device).to(dtype)
    return t.to(device)
