"""Row layouts the GEMM's fast paths accept: TMA descriptors need 16-byte aligned rows, and Triton
vectorizes loads only when it can prove a row stride a multiple of 16 elements (it specializes integer
arguments divisible by 16). A matrix whose row length is not such a multiple gets a padded row stride."""

from __future__ import annotations

import torch


def padded_cols(cols: int) -> int:
    """The row stride (elements) for `cols` columns: `cols` when a multiple of 16, else the next multiple of 64."""
    return cols if cols % 16 == 0 else -(-cols // 64) * 64


def vector_cols(cols: int, *ts: torch.Tensor) -> int:
    """The columns a masked copy between `ts` may touch so that its masks keep whole vectors: `cols` padded
    (padded_cols) where every tensor's rows hold that many, else `cols`. Nothing may read the padding it writes."""
    wide = padded_cols(cols)
    return wide if all(t.stride(0) >= wide for t in ts) else cols


def tma_rows(t: torch.Tensor) -> bool:
    """Whether a 2-D tensor's rows can be read or written by the copy engine (TMA): row-major, 16-byte aligned start
    and row stride (for bf16 / fp16: a row stride that is a multiple of 8 elements)."""
    return t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0


def aligned_rows(t: torch.Tensor) -> bool:
    """Whether a 2-D tensor can be read in place on the fast paths: row-major, row stride a multiple of 16
    elements, 16-byte aligned start."""
    return t.stride(1) == 1 and t.stride(0) % 16 == 0 and t.data_ptr() % 16 == 0


def vector_stride_multiple(*ts: torch.Tensor) -> int:
    """What the pointer path may tell the compiler the row strides of `ts` are multiples of (the kernel's
    STRIDE_ALIGN): the elements of 16 bytes where every row stride is such a multiple but one is not a multiple of
    16 elements (which Triton finds itself), else 1."""
    vec = max(1, 16 // ts[0].element_size())
    strides = [t.stride(0) for t in ts]
    return vec if all(s % vec == 0 for s in strides) and any(s % 16 for s in strides) else 1


def padded_zeros(rows: int, cols: int, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """A rows x cols view of zeros whose row stride is padded_cols(cols)."""
    return torch.zeros((rows, padded_cols(cols)), dtype=dtype, device=device)[:, :cols]


def padded_copy(t: torch.Tensor) -> torch.Tensor:
    """`t` itself when aligned_rows(t), else a copy with padded rows."""
    if aligned_rows(t):
        return t
    out = padded_zeros(t.shape[0], t.shape[1], t.dtype, t.device)
    out.copy_(t)
    return out


def buffer_key(t: torch.Tensor) -> tuple:
    """What a launch bound on `t` depends on: its address, strides, shape, dtype and device. Launches are kept by
    this, not by the tensor: another tensor with the same key (a dropped activation's successor at the freed
    address) reads the same memory the same way."""
    return (t.data_ptr(), t.stride(), t.shape, t.dtype, t.get_device())
