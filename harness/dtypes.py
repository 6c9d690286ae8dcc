"""The benchmark's random inputs of a datatype (the dtypes themselves: stream_k.dtypes). torch only: the reference
baselines use this without the Triton stack."""

from __future__ import annotations

import torch

from streamk_pgas.stream_k.dtypes import torch_dtype

__all__ = ["random_inputs"]


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
