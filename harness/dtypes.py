"""Datatype names (spec.DATATYPES) as torch dtypes, and the benchmark's random inputs. torch only: the
reference baselines use this without the Triton stack."""

from __future__ import annotations

import torch

import spec

DATATYPES: dict[str, torch.dtype] = {name: getattr(torch, d.torch_name) for name, d in spec.DATATYPES.items()}

__all__ = ["DATATYPES", "output_dtype", "random_inputs", "torch_dtype"]


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of a datatype name; ValueError naming the valid ones."""
    return DATATYPES[spec.datatype(name).name]


def output_dtype(name: str) -> torch.dtype:
    """C's dtype: int8 products accumulate and are stored as int32; floats keep their type."""
    return getattr(torch, spec.datatype(name).output_torch_name)


def random_inputs(shape: tuple[int, ...], name: str, generator: torch.Generator,
                  device: torch.device | str) -> torch.Tensor:
    """Random data (never zeros): int8 in [-8, 8), floats ~ N(0, 1). Drawn where the generator lives (a
    device generator draws large inputs on the GPU), then moved to `device`."""
    dtype = torch_dtype(name)
    if dtype == torch.int8:
        t = torch.randint(-8, 8, shape, generator=generator, dtype=torch.int8, device=generator.device)
    else:
        t = torch.randn(shape, generator=generator, dtype=torch.float32, device=generator.device).to(dtype)
    return t.to(device)
