"""Failures of default configurations that the check reports but does not fail on, each with its reason and bound.

Each entry names builds of the op's kernels as the planner configures them (the GEMM's own defaults, stream_k/
configs.py, have none: they must not spill at all), as measured with the Triton CI installs. A spill (bytes of spill
stores on NVIDIA, of scratch on AMD) above an entry's bound, shared memory above its bound, or a spill or overflow
in a build no entry names, fails the check; delete an entry once its builds are right. Other Triton versions differ
(the H100/H200s run 3.6: the README's Targets section has its numbers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownIssue:
    target: str  # a regular expression the target's name matches in full
    config: str  # a regular expression the build's config label matches in full
    why: str
    spill_bytes: int = 0  # bytes of spill stores allowed
    shared_bytes: int = 0  # shared memory allowed although it exceeds what a program may have (cannot launch)


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    # The separate communication kernel holds 32-80 registers, and ptxas keeps a word or a few of a sub-tile's
    # addresses on the stack rather than take more (it does so at any -maxrregcount): a few bytes a piece beside
    # the 8-32 KiB it moves. Which builds do so moves with any change to the loop (seen: all_reduce w4 on sm_100,
    # one_shot w8 on sm_90, gemm_reduce_scatter w2 on both).
    KnownIssue("sm(90|100)", r"\w+ (bulk_sync|two_streams) world\d bf16",
               "ptxas spills a few bytes of the separate communication kernel to hold its occupancy", spill_bytes=24),
    # The op's kernels whose GEMM programs sit at the register limit (254-255) with the communication (or a push
    # epilogue) beside them in one kernel: ptxas keeps a word or two on the stack, and which builds it does so in
    # moves with any change to the code around them (seen: all_reduce fused w2, all_scatter w8 on 128x128 tiles,
    # gemm_reduce_scatter fused w8).
    KnownIssue("sm(90|100)", r"\w+ \w+ world\d bf16 128x(128|256)x64/s\d/w8/tma r\d( ragged_k)?",
               "a word or two of the op's GEMM-bearing kernel on the stack at the register limit", spill_bytes=16),
)


def known_issue(target: str, config: str, spill_bytes: int, shared_bytes: int) -> KnownIssue | None:
    """The entry that accepts a build's spill stores and its shared memory beyond the target's limit (0 for none
    of either), if one does."""
    for k in KNOWN_ISSUES:
        if (re.fullmatch(k.target, target) and re.fullmatch(k.config, config) and spill_bytes <= k.spill_bytes
                and shared_bytes <= k.shared_bytes):
            return k
    return None
