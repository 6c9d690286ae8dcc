"""The check's output: a table per target, the failures (one line each) and the JSON document."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamk_pgas.tools.compile_check.known_issues import KnownIssue, known_issue
from streamk_pgas.tools.compile_check.spec import LaunchSpec
from streamk_pgas.tools.compile_check.targets import BuildTarget


@dataclass
class Row:
    """One distinct build on one target, with every launch spec that compiles to it."""

    target: BuildTarget
    specs: list[LaunchSpec]
    build: Any = None  # what build.specialise made of the first spec (the others specialise to the same)
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def head(self) -> LaunchSpec:
        return self.specs[0]

    @property
    def default(self) -> bool:
        return any(s.default for s in self.specs)

    def known(self) -> KnownIssue | None:
        """The known_issues entry that accepts this build's spill or shared-memory overflow (None: none does, or
        there is neither)."""
        r = self.result
        if r.get("status") != "ok" or not (r.get("spills") or r.get("unfit")):
            return None
        u = r["usage"]
        spilled = u.get("scratch" if self.target.amd else "spill_stores", 0)
        return known_issue(self.target.name, self.head.config, spilled if r.get("spills") else 0,
                           u.get("shared", 0) if r.get("unfit") else 0)

    def failure(self) -> str | None:
        """Why this build fails the check (None: it passes): it does not compile, its assembly holds a forbidden
        pattern, or, in a default configuration, it does not fit the target or spills (unless a known issue)."""
        r = self.result
        if r.get("status") != "ok":
            return f"does not compile: {r.get('error', 'unknown error')}"
        if r.get("forbidden"):
            return "; ".join(r["forbidden"])
        if not self.default or not (r.get("unfit") or r.get("spills")) or self.known() is not None:
            return None
        if r.get("unfit"):
            return str(r["unfit"])
        u = r["usage"]
        what = (f"{u.get('vgpr_spills', 0)} VGPRs, {u.get('scratch', 0)} bytes of scratch" if self.target.amd else
                f"{u.get('spill_stores', 0)} bytes stored, {u.get('spill_loads', 0)} loaded")
        return f"a default configuration spills ({what})"

    def as_dict(self) -> dict[str, Any]:
        h = self.head
        return {"kernel": h.name, "group": h.group, "config": h.config, "default": self.default,
                "uses": [s.use for s in self.specs], "extra": dict(h.extra),
                "constexprs": self.build.constexprs if self.build is not None else {}, **self.result,
                "failure": self.failure(), "known_issue": k.why if (k := self.known()) else None}


def _cell(x: Any) -> str:
    return "-" if x is None else str(x)


def table(target: BuildTarget, rows: Sequence[Row]) -> str:
    """The target's table: one line per distinct build."""
    amd = target.amd
    head = ["kernel", "config"]
    head += (["VGPR", "AGPR", "SGPR", "spill v/s", "scratch", "LDS", f"prog/{target.unit}", "LLVM w/SIMD"] if amd
             else ["regs", "spill st/ld", "stack", "shared", f"prog/{target.unit}"])
    head += ["s", "uses"]
    lines = []
    for row in rows:
        r, h = row.result, row.head
        cells = [h.name, h.config]
        if r.get("status") == "ok":
            u = r["usage"]
            occ = f"{r['programs_per_unit']} ({r['occupancy_limit']})"
            if amd:
                cells += [_cell(u.get("registers")), _cell(u.get("agprs")), _cell(u.get("sgprs")),
                          f"{u.get('vgpr_spills', 0)}/{u.get('sgpr_spills', 0)}", _cell(u.get("scratch")),
                          _cell(u.get("shared")), occ, _cell(u.get("llvm_waves_per_simd"))]
            else:
                cells += [_cell(u.get("registers")), f"{u.get('spill_stores', 0)}/{u.get('spill_loads', 0)}",
                          _cell(u.get("scratch")), _cell(u.get("shared")), occ]
            cells.append("cached" if r.get("cached") else f"{r.get('compile_s', 0):.1f}")
        else:
            cells += ["FAILED"] + [""] * (len(head) - 4)
        uses = sorted(dict.fromkeys(s.use for s in row.specs), key=lambda u: ("(auto)" not in u, u))
        cells.append(uses[0] + (f" (+{len(uses) - 1})" if len(uses) > 1 else ""))
        if row.failure():
            cells[0] = "!" + cells[0]
        elif row.known():
            cells[0] = "~" + cells[0]  # a known issue (known_issues.py)
        elif row.result.get("spills") or row.result.get("unfit"):
            cells[0] = "?" + cells[0]  # a spill or overflow outside the defaults
        lines.append(cells)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, lines)])


def failure_lines(rows: Sequence[Row]) -> list[str]:
    """One line per failing build: target, kernel, config, why."""
    return [f"{row.target.name} {row.head.name} [{row.head.config}]: {why}"
            for row in rows if (why := row.failure()) is not None]


def document(rows: Sequence[Row], targets: Sequence[BuildTarget], meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON document: per target its facts and builds, the failures, and `meta` (versions, times)."""
    out: dict[str, Any] = {**meta, "targets": {}, "failures": failure_lines(rows)}
    for t in targets:
        mine = [r for r in rows if r.target is t]
        out["targets"][t.name] = {"label": t.label, "backend": t.backend, "arch": t.arch, "units": t.units,
                                  "warp_size": t.warp_size, "builds": [r.as_dict() for r in mine],
                                  "launch_specs": sum(len(r.specs) for r in mine)}
    return out
