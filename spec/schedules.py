"""The GEMM's Stream-K schedules (stream_k.plan describes each) and "auto", the GEMM model's choice."""

from __future__ import annotations

SCHEDULES = ("hybrid", "dp", "sk")  # DP waves + Stream-K on the leftover tiles; data-parallel only; Stream-K only
AUTO_SCHEDULE = "auto"
SCHEDULE_CHOICES = (AUTO_SCHEDULE, *SCHEDULES)  # what a caller may ask for
# The stand-alone GEMM's own: split-K (every tile cut along K into equal pieces, one program each). The op's kernels
# run the schedules above only.
GEMM_ONLY_SCHEDULES = ("splitk",)
GEMM_SCHEDULE_CHOICES = (*SCHEDULE_CHOICES, *GEMM_ONLY_SCHEDULES)
