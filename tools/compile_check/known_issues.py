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
    # GEMM programs at the register limit (255) with the communication beside them in one kernel: a word or two.
    KnownIssue("sm90", r"(all_reduce fused world2 bf16 128x256x64/s3/w8/tma r\d ragged_k|"
                       r"all_scatter (two_streams|fused_sequential) world8 bf16 128x128x64/s5/w8/tma r1)",
               "a word or two of the fused kernel on the stack at the register limit", spill_bytes=16),
)


def known_issue(target: str, config: str, spill_bytes: int, shared_bytes: int) -> KnownIssue | None:
    """The entry that accepts a build's spill stores and its shared memory beyond the target's limit (0 for none
    of either), if one does."""
    for k in KNOWN_ISSUES:
        if (re.fullmatch(k.target, target) and re.fullmatch(k.config, config) and spill_bytes <= k.spill_bytes
                and shared_bytes <= k.shared_bytes):
            return k
    return None
