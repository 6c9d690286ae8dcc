"""The overlap modes: how one step shares the device between the GEMM and the communication (the taxonomy of
the Iris paper, plus the copy engines). `auto` asks the planner to choose."""

from __future__ import annotations

from dataclasses import dataclass

AUTO = "auto"


@dataclass(frozen=True)
class Mode:
    name: str
    splits_sms: bool  # the GEMM runs on gemm_sms programs, the communication on the other total - gemm_sms
    gemm_on_every_sm: bool  # the GEMM keeps every SM and the communication takes none (gemm_sms == total_sms)
    overlapped: bool  # GEMM and communication run at the same time on separate SMs
    help: str

    def gemm_programs(self, total: int, gemm: int, world: int) -> int:
        """Programs doing GEMM work in a step (total_sms and gemm_sms given). With one rank there is nothing to
        communicate, so every program computes."""
        return gemm if self.splits_sms and world > 1 else total

    def comm_programs(self, total: int, gemm: int, world: int) -> int:
        """Programs that only communicate (their SMs are taken from the GEMM, or run after it); none with one
        rank."""
        if world == 1:
            return 0
        if self.splits_sms:
            return total - gemm
        return total if self.name == "bulk_sync" else 0


MODES: dict[str, Mode] = {m.name: m for m in (
    Mode("bulk_sync", False, False, False,
         "GEMM on all SMs, then communication on all SMs (the baseline schedule)"),
    Mode("two_streams", True, False, True,
         "GEMM kernel on --gemm_sms SMs and communication kernel on the rest, on two streams"),
    Mode("fused", True, False, True,
         "one kernel; programs < --gemm_sms do GEMM tiles, the others communication tiles"),
    Mode("fused_sequential", False, False, False,
         "one kernel on all SMs; each GEMM program pushes its finished tiles to the peers from its epilogue "
         "(one_shot: publishes, then reduces after its GEMM work)"),
    Mode("copy_engine", False, True, False,
         "GEMM on all SMs; the copy engines move its finished rows (or A's rows) with no SM, waiting on its tile "
         "counts (all_scatter, all_gather_gemm, gemm_reduce_scatter)"),
)}
AUTO_HELP = "the planner's choice for this problem and device (overlap/planner.py; a --tune result if cached)"


def mode(name: str) -> Mode:
    """The record of a mode name; ValueError naming the valid ones."""
    if name not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)} or {AUTO}; got {name!r}")
    return MODES[name]
