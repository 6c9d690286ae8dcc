"""Failures of default configurations that the check reports but does not fail on, each with its reason and bound.

Each entry names builds this change may not alter (the NVIDIA config tables belong to the GEMM's owner), as
measured with the Triton CI installs. A spill above an entry's bound, shared memory above its bound, or a spill or
overflow in a build no entry names, fails the check; delete an entry once its builds are right. Other Triton
versions differ (the H100/H200s run 3.6: the README's Targets section has its numbers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SM90_TABLE = "sm_100 takes sm_90's table (stream_k/configs.py), not tuned for B200"
_FP32_TMA = ("fp32 through tensor descriptors (the ieee dot has no tensor-core path): the ptxas of Triton 3.9 gives "
             "the kernel 32 registers and spills ~15 KB; Triton 3.6's does not spill")


@dataclass(frozen=True)
class KnownIssue:
    target: str
    config: str  # a regular expression the build's config label matches in full
    why: str
    spill_bytes: int = 0  # bytes of spill stores allowed
    shared_bytes: int = 0  # shared memory allowed although it exceeds what a program may have (cannot launch)


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue("sm90", r"fp32 128x128x32/s3/w8/tma r[12].*", _FP32_TMA, spill_bytes=16 * 1024),
    KnownIssue("sm100", r"fp32 128x128x32/s3/w8/tma r[12].*", f"{_FP32_TMA}; {_SM90_TABLE}", spill_bytes=16 * 1024),
    KnownIssue("sm90", r"int8 128x256x128/s3/w8/tma r[12].*",
               "int8 128x256x128 through tensor descriptors spills 8-52 B with Triton 3.9; with Triton 3.6 (the "
               "H100/H200s') it needs 245,808 B of shared memory, more than the 232,448 a program may have, so it "
               "cannot launch there", spill_bytes=64),
    KnownIssue("sm100", r"int8 128x256x128/s3/w8/tma r[12].*",
               f"int8 128x256x128 through tensor descriptors needs 256 KiB of shared memory with Triton 3.9 and "
               f"cannot launch; {_SM90_TABLE}", shared_bytes=256 * 1024),
)


def known_issue(target: str, config: str, spill_bytes: int, shared_bytes: int) -> KnownIssue | None:
    """The entry that accepts a build's spill stores and its shared memory beyond the target's limit (0 for none
    of either), if one does."""
    for k in KNOWN_ISSUES:
        if (k.target == target and re.fullmatch(k.config, config) and spill_bytes <= k.spill_bytes
                and shared_bytes <= k.shared_bytes):
            return k
    return None
