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

_GEMM_AT_THE_EDGE = ("the op's sm_90 builds with 128x256 tiles take 253-255 of the 255 registers a thread may "
                     "have, as the GEMM alone does (253; its highest registers in the Stream-K fix-up, "
                     "stream_k/kernel.py _sum_pieces, which holds both column halves' sums beside the partial it "
                     "reads), so one more value live across the GEMM goes to local memory once per program")
_ONE_SHOT_FUSED = (f"{_GEMM_AT_THE_EDGE}: a 64-bit offset of this rank's words (cur_rank's, which the publish "
                   "epilogue, the communication programs and the step's end share) is stored at the program's "
                   "start and reloaded when it communicates and at the step's end (16 B). Not the error-aware "
                   "waits: without their error-word read the build spills the same 16 B")
_RS_EPILOGUE = (f"{_GEMM_AT_THE_EDGE}: a 32-bit index of the GEMM's tile rows (stream_k/kernel.py streamk_program's "
                "rm) is stored at the program's start and reloaded per work item (8 B). The epilogue that adds the "
                "tile into its owners' rows (overlap/communication/reduce_scatter.py) in column quarters is the "
                "least of the splits tried: eighths remove the spill on sm_90 but spill 268-288 B on sm_100, halves "
                "spill 100-260 B")


@dataclass(frozen=True)
class KnownIssue:
    target: str
    config: str  # a regular expression the build's config label matches in full
    why: str
    spill_bytes: int = 0  # bytes of spill stores allowed
    shared_bytes: int = 0  # shared memory allowed although it exceeds what a program may have (cannot launch)


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    # the op's launches (tools.compile_check.kernels.op_specs)
    KnownIssue("sm90", r"one_shot fused world(2|8) bf16 128x256x64/s3/w8/tma r1 ragged_k", _ONE_SHOT_FUSED,
               spill_bytes=16),
    KnownIssue("sm90", r"gemm_reduce_scatter fused_sequential world\d+ bf16 128x256x64/s3/w8/tma r1 ragged_k",
               _RS_EPILOGUE, spill_bytes=8),
)


def known_issue(target: str, config: str, spill_bytes: int, shared_bytes: int) -> KnownIssue | None:
    """The entry that accepts a build's spill stores and its shared memory beyond the target's limit (0 for none
    of either), if one does."""
    for k in KNOWN_ISSUES:
        if (k.target == target and re.fullmatch(k.config, config) and spill_bytes <= k.spill_bytes
                and shared_bytes <= k.shared_bytes):
            return k
    return None
