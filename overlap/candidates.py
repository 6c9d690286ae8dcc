"""What the planner ranks: a problem (an algorithm's spec record and its shape on W ranks) and a candidate way to
run it (a mode, the SM split, the GEMM stream_k.select chooses for its program count, the communication tile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamk_pgas import spec
from streamk_pgas.stream_k.select import GemmChoice


@dataclass(frozen=True)
class Problem:
    algorithm: str
    m: int
    n: int
    k: int
    datatype: str
    world_size: int

    @property
    def spec(self) -> spec.Algorithm:
        return spec.ALGORITHMS[self.algorithm]

    def local(self) -> tuple[int, int, int]:
        """(M, N, K) of this rank's GEMM."""
        return self.spec.family.gemm_shape(self.m, self.n, self.k, self.world_size)

    def bytes_moved(self, via_owner: bool = True) -> tuple[float, float]:
        """(bytes this rank moves to or from peers, bytes it moves locally) per step; via_owner=False: the family's
        payload straight to where it ends (the copy engines' schedules, no owner in between)."""
        dt = spec.DATATYPES[self.datatype]
        moves = self.spec.bytes_moved if via_owner else self.spec.family.bytes_moved
        return moves(self.m, self.n, self.k, self.world_size, dt.bytes, dt.output_bytes)


@dataclass(frozen=True)
class Candidate:
    mode: str
    total_sms: int
    gemm_sms: int
    gemm: GemmChoice  # the GEMM on the mode's GEMM programs (its config and Stream-K plan)
    comm_tile_m: int
    comm_tile_n: int
    predicted_ms: float = 0.0

    def fields(self) -> dict[str, Any]:
        """The OverlapConfig fields this candidate fixes (overlap.config.PLANNED_FIELDS)."""
        plan = self.gemm.plan
        return {"mode": self.mode, "total_sms": self.total_sms, "gemm_sms": self.gemm_sms, "kernel": self.gemm.config,
                "sk_rounds": plan.sk_rounds, "schedule": plan.schedule, "two_tiles": plan.two_tiles,
                "comm_tile_m": self.comm_tile_m, "comm_tile_n": self.comm_tile_n}

    def describe(self) -> str:
        k, p = self.gemm.config, self.gemm.plan
        sched = p.schedule + ("" if p.schedule != "hybrid" else " two_tiles" if p.two_tiles else " one_tile")
        return (f"{self.mode} gemm_sms {self.gemm_sms}/{self.total_sms} tile {k.BLK_M}x{k.BLK_N}x{k.BLK_K} "
                f"s{k.num_stages} w{k.num_warps}{' tma' if k.tma else ''} {sched} sk_rounds {p.sk_rounds} "
                f"comm {self.comm_tile_m}x{self.comm_tile_n}")
