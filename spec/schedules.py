"""The GEMM's Stream-K schedules (stream_k.plan describes each) and "auto", the GEMM model's choice."""

from __future__ import annotations

SCHEDULES = ("hybrid", "dp", "sk")  # DP waves + Stream-K on the leftover tiles; data-parallel only; Stream-K only
AUTO_SCHEDULE = "auto"
SCHEDULE_CHOICES = (AUTO_SCHEDULE, *SCHEDULES)  # what a caller may ask for
# The stand-alone GEMM's own: split-K (every tile cut along K into equal pieces, one program each). The op's kernels
# run the schedules above only.
GEMM_ONLY_SCHEDULES = ("splitk",)
GEMM_SCHEDULE_CHOICES = (*SCHEDULE_CHOICES, *GEMM_ONLY_SCHEDULES)


def schedule_label(schedule: str, two_tiles: bool) -> str:
    """A schedule's name in logs, file names and the GEMM's description: hybrid over the leftover tiles only is
    "hybrid1", over them plus one full wave (two_tiles) "hybrid2"; the other schedules keep their name."""
    return schedule if schedule != "hybrid" else "hybrid2" if two_tiles else "hybrid1"


def parse_schedule_label(label: str) -> tuple[str, bool]:
    """(schedule, two_tiles) of a label (schedule_label's, or a plain schedule name: "hybrid" is the two-tile
    hybrid)."""
    return ("hybrid" if label.startswith("hybrid") else label), label != "hybrid1"
