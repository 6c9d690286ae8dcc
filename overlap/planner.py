"""The one place that chooses the op's defaults: for a problem (algorithm, M, N, K, dtype, world size) on a
target it picks the mode, the SM split, the GEMM (tile, stages, warps, TMA, Stream-K schedule and rounds: what
stream_k.select chooses for this rank's GEMM on the mode's GEMM programs) and the communication tile. Explicit
values win: the planner only fills what the caller left unset, and says which values it planned
(`Plan.planned`) and where they came from (`Plan.source`: a tuning-cache entry, the cost model, or the
interpreter's fixed small config).

The cost model ranks candidates by a predicted step time: the GEMM's (stream_k.select.gemm_time_us) and each
mode's own terms (overlap.modes: `cost`, from the measured rates of overlap.rates). It is a ranking model, not a
promise: `benchmark.py --tune` measures the best few candidates on the machine and stores the winner in the
tuning cache (`TuningCache`), which later plans read. With one rank there is nothing to communicate: every mode's
step is the GEMM on all programs, and the model ranks the GEMM's choices alone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamk_pgas import spec
from streamk_pgas.overlap.algorithms import ALGORITHMS
from streamk_pgas.overlap.candidates import Candidate, Problem
from streamk_pgas.overlap.config import PLANNED_FIELDS, InvalidConfig
from streamk_pgas.overlap.modes import MODE_STEPS
from streamk_pgas.spec import AUTO, Target
from streamk_pgas.stream_k.configs import KernelConfig, default_config
from streamk_pgas.stream_k.select import GemmChoice, choose_gemm, gemm_candidates

CACHE_ENV = "STREAMK_PGAS_TUNING_CACHE"

__all__ = ["Candidate", "Plan", "Problem", "TuningCache", "plan", "rank_candidates", "tune_candidates"]


@dataclass
class Plan:
    choice: Candidate
    planned: list[str]  # the fields the planner filled (the rest were given)
    source: str  # "cache", "model" or "interpreter"
    ranked: list[Candidate] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        c = self.choice
        return {"source": self.source, "planned": self.planned, "choice": c.describe(),
                "predicted_ms": round(c.predicted_ms, 4) if c.predicted_ms else None,
                "runner_up": [x.describe() for x in self.ranked[1:3]]}


def given(fixed: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields a caller fixed: those not None (and a mode or schedule other than "auto")."""
    return {k: v for k, v in (fixed or {}).items()
            if v is not None and not (k in ("mode", "schedule") and v == AUTO)}


def _gemm_fixed(fixed: Mapping[str, Any], rounds: int) -> dict[str, Any]:
    return {"config": fixed.get("kernel"), "schedule": fixed.get("schedule", AUTO), "two_tiles": fixed.get("two_tiles"),
            "sk_rounds": rounds, "sk_first": fixed.get("sk_first", False)}


def gemm_options(p: Problem, target: Target, programs: int, fixed: Mapping[str, Any]) -> list[GemmChoice]:
    """stream_k.select's GEMM candidates for this rank's GEMM on `programs` programs, with the fixed fields. Where
    sk_rounds is open it also tries two rounds (a shorter tail of tiles completing together at the GEMM's end,
    for the communication that follows them; nothing to gain with one rank, or for one_shot)."""
    m, n, k = p.local()
    if "sk_rounds" in fixed:
        rounds = [fixed["sk_rounds"]]
    else:
        rounds = [1, 2] if p.world_size > 1 and p.algorithm != "one_shot" else [1]
    out = []
    for r in rounds:
        for choice in gemm_candidates(m, n, k, p.datatype, programs, target.arch, sms=target.sms,
                                      fixed=_gemm_fixed(fixed, r), op_tiles=True):
            if r == 1 or choice.plan.sk_tiles:  # rounds cut Stream-K tiles: none to cut in a data-parallel plan
                out.append(choice)
    return out


def comm_tile(p: Problem, kernel: KernelConfig) -> tuple[int, int]:
    """The communication sub-tile (rows, columns) when not given: the GEMM tile, or fewer rows where the algorithm
    says so for the world size (overlap.algorithms.record: comm_tile_rows)."""
    rows = ALGORITHMS[p.algorithm].comm_tile_rows
    return (kernel.BLK_M if rows is None else rows(kernel.BLK_M, kernel.BLK_N, p.world_size)), kernel.BLK_N


def rank_candidates(p: Problem, target: Target, fixed: Mapping[str, Any] | None = None) -> list[Candidate]:
    """Every candidate that agrees with the fixed fields, best predicted first."""
    fixed = given(fixed)
    T = fixed.get("total_sms", target.sms)
    # the algorithm's modes that can run on the target (a mode given is checked as given)
    modes = [fixed["mode"]] if "mode" in fixed else [
        m for m in p.spec.modes if MODE_STEPS[m].unavailable(target) is None and MODE_STEPS[m].auto_candidate(p)]
    out: list[Candidate] = []
    for name in modes:
        steps = MODE_STEPS[name]
        for g in steps.gemm_sms_options(T, fixed, p.world_size):
            programs = spec.MODES[name].gemm_programs(T, g, p.world_size)
            for choice in gemm_options(p, target, programs, fixed):
                ctm, ctn = comm_tile(p, choice.config)
                c = Candidate(name, T, g, choice, fixed.get("comm_tile_m", ctm), fixed.get("comm_tile_n", ctn))
                out.append(dataclasses.replace(c, predicted_ms=steps.cost(p, target, c)))
    out.sort(key=lambda c: c.predicted_ms)
    return out


def interpreter_choice(p: Problem, target: Target, fixed: Mapping[str, Any]) -> Candidate:
    """On the CPU the interpreter's time says nothing of a GPU's: one small fixed config (fused, 4 programs), the
    two-tile hybrid (Stream-K and its fix-up on the most tiles, so the CPU tests exercise them)."""
    kernel = fixed.get("kernel") or default_config(p.datatype, "interpreter")
    total = fixed.get("total_sms") or target.sms
    mode = fixed.get("mode") or "fused"
    gemm = fixed.get("gemm_sms") or (total if spec.MODES[mode].gemm_on_every_sm else max(1, total // 2))
    programs = spec.MODES[mode].gemm_programs(total, gemm, p.world_size)
    m, n, k = p.local()
    choice = choose_gemm(m, n, k, p.datatype, programs, target.arch, sms=target.sms, tma=False,
                         fixed={"config": kernel, "schedule": fixed.get("schedule", "hybrid"),
                                "two_tiles": fixed.get("two_tiles", True), "sk_rounds": fixed.get("sk_rounds", 1),
                                "sk_first": fixed.get("sk_first", False)}, op_tiles=True)
    return Candidate(mode, total, gemm, choice, fixed.get("comm_tile_m") or min(16, kernel.BLK_M),
                     fixed.get("comm_tile_n") or kernel.BLK_N)


def plan(p: Problem, target: Target, fixed: Mapping[str, Any] | None = None,
         cache: TuningCache | None = None) -> Plan:
    """The values for every field of PLANNED_FIELDS: the fixed ones as given, the rest planned."""
    fixed = given(fixed)
    planned = [f for f in PLANNED_FIELDS if f not in fixed]
    if target.interpreted:
        return Plan(interpreter_choice(p, target, fixed), planned, "interpreter")
    ranked = rank_candidates(p, target, fixed)
    if cache is not None:
        hit = cache.lookup(p, target)
        if hit is not None and all(hit.fields()[f] == v for f, v in fixed.items() if f in PLANNED_FIELDS):
            return Plan(hit, planned, "cache", [hit, *ranked])
    return Plan(ranked[0], planned, "model", ranked)


def tune_candidates(p: Problem, target: Target, fixed: Mapping[str, Any] | None = None,
                    count: int = 4) -> list[Candidate]:
    """The few candidates --tune measures: the model's best, then the best of each other mode, then of each
    other tile width, then the runners-up in the model's order (so the model's blind spots get measured)."""
    ranked = rank_candidates(p, target, fixed)
    picked: list[Candidate] = []
    for key in (lambda c: c.mode, lambda c: (c.mode, c.gemm.config.BLK_N), lambda c: id(c)):
        seen = {key(c) for c in picked}
        for c in ranked:
            if key(c) not in seen and c not in picked:
                seen.add(key(c))
                picked.append(c)
    return picked[:count]


# ---- the tuning cache -----------------------------------------------------------------------------------

def default_cache_path() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "streamk-pgas" / "tuning.json"


class TuningCache:
    """Measured winners, kept across runs in one JSON file, keyed by the problem and the device (and the
    Triton version, whose code generation changes the answer). Written atomically (rename)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()

    @staticmethod
    def key(p: Problem, target: Target) -> str:
        import triton

        return (f"{p.algorithm}|{p.m}x{p.n}x{p.k}|{p.datatype}|w{p.world_size}|{target.name}|{target.sms}sm|"
                f"triton{triton.__version__}")

    def entries(self) -> dict[str, Any]:
        """The cache's entries ({} while the file does not exist). A file that is not a tuning cache (a folder,
        unreadable, not a JSON object) raises InvalidConfig("tuning_cache"), rather than being ignored and later
        overwritten by a --tune."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise InvalidConfig("tuning_cache", f"cannot read {self.path} ({exc.strerror}): give a file") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidConfig("tuning_cache", f"{self.path} is not a tuning cache (not JSON: {exc}); fix it or "
                                "remove it") from None
        if not isinstance(data, dict):
            raise InvalidConfig("tuning_cache", f"{self.path} is not a tuning cache (a JSON {type(data).__name__}, "
                                "not an object); fix it or remove it")
        return data

    def lookup(self, p: Problem, target: Target) -> Candidate | None:
        """The stored winner for the problem on the target, its GEMM as stream_k.select makes it for those fields
        (None: no entry, or one from another version of the fields, re-tuned later)."""
        entry = self.entries().get(self.key(p, target))
        if not isinstance(entry, dict):
            return None
        try:
            f = dict(entry["fields"])
            f["kernel"] = KernelConfig(**f["kernel"])
            programs = spec.MODES[f["mode"]].gemm_programs(f["total_sms"], f["gemm_sms"], p.world_size)
            m, n, k = p.local()
            choice = choose_gemm(m, n, k, p.datatype, programs, target.arch, sms=target.sms,
                                 fixed={"config": f["kernel"], "schedule": f["schedule"], "two_tiles": f["two_tiles"],
                                        "sk_rounds": f["sk_rounds"]}, op_tiles=True)
            return Candidate(f["mode"], f["total_sms"], f["gemm_sms"], choice, f["comm_tile_m"], f["comm_tile_n"])
        except (KeyError, TypeError, ValueError):
            return None

    def store(self, p: Problem, target: Target, fields: Mapping[str, Any], measured_ms: float,
              tried: list[dict[str, Any]]) -> None:
        """Store a measured winner: its OverlapConfig values of PLANNED_FIELDS."""
        data = self.entries()
        fields = {name: fields[name] for name in PLANNED_FIELDS}
        fields["kernel"] = fields["kernel"].as_dict()
        data[self.key(p, target)] = {"fields": fields, "measured_ms": measured_ms, "tried": tried,
                                     "when": time.strftime("%Y-%m-%dT%H:%M:%S")}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(self.path)
