"""Failures of default configurations that the check reports but does not fail on, each with its reason and bound.

Each entry names builds of the NVIDIA config tables (stream_k/configs.py, tuned by the GEMM's owner), as measured
with the Triton CI installs. A spill above an entry's bound, shared memory above its bound, or a spill or
overflow in a build no entry names, fails the check; delete an entry once its builds are right. Other Triton
versions differ (the H100/H200s run 3.6: the README's Targets section has its numbers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SM90_TABLE = "sm_100 takes sm_90's table (stream_k/configs.py), not tuned for B200"
_POINTER = ("int8 and fp32 go through pointers by default (stream_k.select.default_tma); the NVIDIA tables' int8 "
            "128x256x128 and fp32 128x128x32 tiles spill there: with a ragged K (the masked last K block beside the "
            "accumulator) or in the fix-up")
_UNALIGNED = ("the stand-alone GEMM on a caller's contiguous rows that are not a multiple of 16 elements (no "
              "vectorised loads; the op pads such rows)")


@dataclass(frozen=True)
class KnownIssue:
    target: str
    config: str  # a regular expression the build's config label matches in full
    why: str
    spill_bytes: int = 0  # bytes of spill stores allowed
    shared_bytes: int = 0  # shared memory allowed although it exceeds what a program may have (cannot launch)


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue("sm90", r"(int8 128x256x128|fp32 128x128x32)/s3/w8 r[12]( ragged_k)?( NK%16)?( traced)?", _POINTER,
               spill_bytes=256),
    KnownIssue("sm90", r"(int8 128x256x128|fp32 128x128x32)/s3/w8 r[12] ragged_k unaligned NK%16",
               f"{_POINTER}; {_UNALIGNED}", spill_bytes=4 * 1024),
    KnownIssue("sm100", r"(int8 128x256x128|fp32 128x128x32)/s3/w8 r[12]( ragged_k)?( NK%16)?( traced)?",
               f"{_POINTER}; {_SM90_TABLE}", spill_bytes=256),
    KnownIssue("sm100", r"(int8 128x256x128|fp32 128x128x32)/s3/w8 r[12] ragged_k unaligned NK%16",
               f"{_POINTER}; {_UNALIGNED}; {_SM90_TABLE}", spill_bytes=5 * 1024),
)


def known_issue(target: str, config: str, spill_bytes: int, shared_bytes: int) -> KnownIssue | None:
    """The entry that accepts a build's spill stores and its shared memory beyond the target's limit (0 for none
    of either), if one does."""
    for k in KNOWN_ISSUES:
        if (k.target == target and re.fullmatch(k.config, config) and spill_bytes <= k.spill_bytes
                and shared_bytes <= k.shared_bytes):
            return k
    return None
