"""The defaults of the overlapped op that depend on the algorithm and mode (one place; the harness's
flags and the op's config both read them). Measured on 2 x H200 (results/README.md)."""

from __future__ import annotations

MODES = ("bulk_sync", "two_streams", "fused", "fused_sequential")
OVERLAPPED_MODES = ("two_streams", "fused")

# SMs left to communication by default on a GPU: enough to keep the links busy (remote reads reach
# ~140 GB/s with 16 programs and ~250 GB/s with 32 on an H200; remote stores need fewer).
DEFAULT_COMM_SMS = {"all_reduce": 16, "all_scatter": 8, "one_shot": 14}


def default_comm_sms(algorithm: str, total_sms: int, on_gpu: bool) -> int:
    """Programs left to communication when --gemm_sms is not given (half of them in the interpreter)."""
    return DEFAULT_COMM_SMS.get(algorithm, 16) if on_gpu else max(1, total_sms // 2)


def default_sk_rounds(algorithm: str, mode: str, on_cpu: bool) -> int:
    """Stream-K rounds when not given: two for the overlapped modes of all_reduce and all_scatter, whose
    tail after the GEMM they shorten (2 x H200 at 4864 x 4096 x 8256 and 8192^3); one elsewhere (no better
    for one_shot; bulk_sync and fused_sequential have no such tail to shorten)."""
    return 2 if not on_cpu and algorithm in ("all_reduce", "all_scatter") and mode in OVERLAPPED_MODES else 1
