"""The bound launcher (stream_k.launch.BoundLaunch) against Triton's own launch, on a GPU: same results, from
the second call on through the bound path (pointers resolved once, tensor descriptors encoded once), on the
current stream and on another one, and under CUDA graph capture."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
import torch
import triton
import triton.language as tl
from conftest import on_gpu

from streamk_pgas.stream_k.launch import BoundLaunch

pytestmark = pytest.mark.skipif(not on_gpu(), reason="the bound launcher is a GPU path (the interpreter launches "
                                "through Triton every time)")


@triton.jit
def _scale_rows(X, Y, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Y + offs, tl.load(X + offs, mask=mask) * alpha, mask=mask)


class _Io(NamedTuple):
    X: Any
    Y: Any
    n: Any


class _Meta(NamedTuple):
    BLOCK: Any
    SCALE: Any


@triton.jit
def _scale_tuple(IO, META):
    BLOCK: tl.constexpr = META.BLOCK
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < IO.n
    tl.store(IO.Y + offs, tl.load(IO.X + offs, mask=mask) * META.SCALE, mask=mask)


@triton.jit
def _copy_tiles(X_DESC, Y, stride_y, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    tile = X_DESC.load([pm * BM, 0])
    rm = pm * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    tl.store(Y + rm[:, None] * stride_y + rn[None, :], tile)


def test_pointer_kernel_bound_path_matches() -> None:
    x = torch.randn(10_000, device="cuda")
    y = torch.empty_like(x)
    launch = BoundLaunch(_scale_rows, triton.cdiv(x.numel(), 1024), {"X": x, "Y": y, "n": x.numel(), "alpha": 3.0,
                                                                      "BLOCK": 1024}, {"num_warps": 4})
    launch()  # through Triton (compiles), then binds
    assert launch.fast, launch.fast_refused
    y.zero_()
    launch()  # the bound path
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 3.0)
    side = torch.cuda.Stream()
    y.zero_()
    torch.cuda.synchronize()
    launch(side)
    side.synchronize()
    torch.testing.assert_close(y, x * 3.0)


def test_tuple_arguments_bound_path_matches() -> None:
    """Named-tuple arguments (tensors, a runtime int, constexpr elements passed wrapped), as the overlap kernels
    take them: the bound path passes them as nested tuples (stream_k.launch.flatten_args)."""
    x = torch.randn(5000, device="cuda")
    y = torch.empty_like(x)
    args = {"IO": _Io(x, y, x.numel()), "META": _Meta(tl.constexpr(1024), tl.constexpr(3.0))}
    launch = BoundLaunch(_scale_tuple, triton.cdiv(x.numel(), 1024), args, {"num_warps": 4})
    launch()
    assert launch.fast, launch.fast_refused
    y.zero_()
    launch()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x * 3.0)


def test_tensor_descriptor_kernel_bound_path_and_graph() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tensor descriptors need sm_90+")
    x = torch.randn(256, 64, device="cuda", dtype=torch.bfloat16)
    y = torch.zeros_like(x)
    desc = TensorDescriptor.from_tensor(x, [64, 64])
    launch = BoundLaunch(_copy_tiles, 4, {"X_DESC": desc, "Y": y, "stride_y": y.stride(0), "BM": 64, "BN": 64},
                         {"num_warps": 4})
    launch()
    assert launch.fast, launch.fast_refused
    y.zero_()
    launch()
    torch.cuda.synchronize()
    assert torch.equal(y, x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    y.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, x)
