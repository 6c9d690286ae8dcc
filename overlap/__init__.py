"""The overlapped GEMM + communication as a library op (see overlap.op)."""

from overlap.op import OverlapConfig, OverlapOp, heap_bytes

__all__ = ["OverlapConfig", "OverlapOp", "heap_bytes"]
