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
    target: str
    config: str  # a regular expression the build's config label matches in full
    why: str
    spill_bytes: int = 0  # bytes of spill stores allowed
    shared_bytes: int = 0  # shared memory allowed although it exceeds what a program may have (cannot launch)


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    # The separate communication kernel of the reduce family holds 32-64 registers on sm_100, where ptxas keeps a
    # word or two of a sub-tile's addresses on the stack rather than take more registers (it does so at any
    # -maxrregcount): a few bytes a sub-tile beside the 16-32 KiB it moves.
    KnownIssue("sm100", r"(all_reduce|one_shot) (bulk_sync|two_streams) world[48] bf16",
               "ptxas spills a few bytes of the reduce family's separate communication kernel to hold its occupancy",
               spill_bytes=16),
)


def known_issue(target: str, config: str, spill_bytes: int, shared_bytes: int) -> KnownIssue | None:
    """The entry that accepts a build's spill stores and its shared memory beyond the target's limit (0 for none
    of either), if one does."""
    for k in KNOWN_ISSUES:
        if (k.target == target and re.fullmatch(k.config, config) and spill_bytes <= k.spill_bytes
                and shared_bytes <= k.shared_bytes):
            return k
    return None
