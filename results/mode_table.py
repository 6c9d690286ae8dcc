"""The planner against the modes measured: per cell, every mode of an algorithm timed in one call, the best, what
`auto` picks now (the planner replayed for the cell's device and world size), and the slow-mode notes against the
measured ratios.

    python -m results.mode_table results/logs/h100x4/seqpar-deeff53/w4 [more folders] [--out FOLDER]

A cell is (folder, algorithm, M x N x K, datatype, W): the run logs of one folder ran in one call, so their modes
are comparable; a cell needs two validated modes with a time (`loop`, steps back to back, else `isolated`). Per
cell:
  best          the fastest mode measured, and its time
  auto          the mode the planner picks now (overlap.resolution.resolve_config, mode "auto"); its gap to the
                best (NaN where that mode was not measured); `within` when the gap is at most --within (5%)
  slow          the modes measured more than overlap.resolution.SLOW_MODE (1.5) times the best
  warned        the modes for which the planner now writes a slow-mode note (OverlapOp's SlowModeWarning)
  missed/false  slow but not warned; warned but not slow
  predicted     the planner's step time for each mode measured (milliseconds), beside the measured `modes`
The summary line counts the cells with auto within, and the missed and false notes, per algorithm. Writes
modes.csv and modes.md into --out (default: the first folder); --latest keeps each cell's newest call only, --world
one world size. Logs of a device the planner has no target for (spec.KNOWN_TARGETS) or of one rank are left out,
and counted.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from streamk_pgas import spec
from streamk_pgas.harness.checks import ConfigError, OneLineParser
from streamk_pgas.harness.runlog import read_records
from streamk_pgas.results.grid_table import log_paths_and_out, record_row

CELL = ["folder", "algorithm", "m", "n", "k", "datatype", "world_size", "device"]


def target_named(name: str) -> spec.Target | None:
    """The planner's target for a logged device name, if it has one."""
    return next((t for t in spec.KNOWN_TARGETS.values() if t.name == name), None)


def measured_modes(paths: list[str | Path]) -> pd.DataFrame:
    """One row per validated, timed run log of ours under `paths`: the cell's keys, the mode and its time."""
    rows = []
    for rec in read_records(list(paths)):
        row = record_row(rec)
        if row["producer"] != "benchmark" or row["status"] != "ok":
            continue
        ms, basis = (row["loop_ms"], "loop") if math.isfinite(row["loop_ms"]) else (row["e2e_ms"], "isolated")
        mode = str(row["mode"]).removesuffix(" (auto)")
        rows.append({**{key: row[key] for key in CELL[1:]}, "folder": str(Path(row["path"]).parent),
                     "mode": mode, "ms": ms, "basis": basis, "timestamp": str(rec.get("timestamp") or "")})
    return pd.DataFrame(rows, columns=[*CELL, "mode", "ms", "basis", "timestamp"])


def planned(algorithm: str, m: int, n: int, k: int, datatype: str, world: int, target: spec.Target,
            mode: str = spec.AUTO) -> dict[str, Any]:
    """The planner's plan_info for the cell in `mode` (auto: its pick; another: with its slow-mode note, if any)."""
    from streamk_pgas.overlap.config import OverlapConfig
    from streamk_pgas.overlap.resolution import resolve_config

    cfg = resolve_config(OverlapConfig(algorithm, m, n, k, datatype, mode), target, world)
    return {**(cfg.plan_info or {}), "mode": cfg.mode}


def check_cells(df: pd.DataFrame, within: float) -> tuple[pd.DataFrame, dict[str, int]]:
    """One row per cell with two modes or more (see the module's docstring), and what was left out."""
    from streamk_pgas.overlap.resolution import SLOW_MODE

    rows, left_out = [], {"unknown device": 0, "one rank": 0, "one mode": 0}
    for key, cell in df.groupby(CELL, sort=True):
        info = dict(zip(CELL, key, strict=True))
        times = cell.groupby("mode")["ms"].min().to_dict()
        target = target_named(info["device"])
        if target is None:
            left_out["unknown device"] += 1
            continue
        if info["world_size"] < 2:
            left_out["one rank"] += 1
            continue
        if len(times) < 2:
            left_out["one mode"] += 1
            continue
        problem = (info["algorithm"], int(info["m"]), int(info["n"]), int(info["k"]), info["datatype"],
                   int(info["world_size"]), target)
        best = min(times, key=times.__getitem__)
        auto = planned(*problem)["mode"]
        gap = times[auto] / times[best] - 1 if auto in times else math.nan
        slow = sorted(m for m, t in times.items() if t > SLOW_MODE * times[best])
        plans = {m: planned(*problem, mode=m) for m in sorted(times)}
        warned = [m for m, p in plans.items() if "slow_mode" in p]
        rows.append({**info, "modes": " ".join(f"{m}={t:.4g}" for m, t in sorted(times.items())),
                     "predicted": " ".join(f"{m}={p.get('predicted_ms') or math.nan:.4g}" for m, p in plans.items()),
                     "timestamp": cell["timestamp"].max(),
                     "best": best, "best_ms": times[best], "auto": auto, "auto_gap": gap,
                     "within": bool(gap <= within), "slow": " ".join(slow), "warned": " ".join(warned),
                     "missed": " ".join(m for m in slow if m not in warned),
                     "false": " ".join(m for m in warned if m not in slow)})
    return pd.DataFrame(rows), left_out


def latest_calls(table: pd.DataFrame) -> pd.DataFrame:
    """Per (algorithm, shape, datatype, W, device), the row of the newest call only."""
    key = [c for c in CELL if c != "folder"]
    return table.sort_values("timestamp").groupby(key, sort=True).tail(1).sort_values(key)


def summary_lines(table: pd.DataFrame, within: float) -> list[str]:
    """Per algorithm: cells with auto within, missed and false slow-mode notes."""
    lines = []
    for algorithm, part in table.groupby("algorithm", sort=True):
        missed = sum(len(s.split()) for s in part["missed"])
        false = sum(len(s.split()) for s in part["false"])
        slow = sum(len(s.split()) for s in part["slow"])
        lines.append(f"{algorithm}: auto within {within:.0%} of the best mode on {int(part['within'].sum())} of "
                     f"{len(part)} cells; slow modes measured {slow}, not warned {missed}; warned but not slow "
                     f"{false}")
    return lines


def to_markdown(table: pd.DataFrame, lines: list[str], source: str) -> str:
    cols = ["algorithm", "m", "n", "k", "world_size", "best", "best_ms", "auto", "auto_gap", "slow", "warned",
            "modes", "predicted"]
    out = [f"# Modes measured against the planner ({source})", "", *[f"- {line}" for line in lines], "",
           "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in table.iterrows():
        cells = [f"{row[c]:.1%}" if c == "auto_gap" and math.isfinite(row[c]) else
                 f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in cols]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def build_parser() -> OneLineParser:
    ap = OneLineParser(prog="mode_table.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="folders (or files) of benchmark.py run logs")
    ap.add_argument("--out", default=None, help="folder for modes.csv and modes.md (default: the first path)")
    ap.add_argument("--latest", action="store_true", help="per cell, the newest call's modes only")
    ap.add_argument("--world", type=int, default=None, help="only the cells of this world size")
    ap.add_argument("--within", type=float, default=0.05, help="auto's allowed gap to the best mode (0.05: 5%%)")
    return ap


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if not 0 <= args.within < 1:
            raise ConfigError("--within", f"must be in [0, 1); got {args.within}")
        out = log_paths_and_out(args.paths, args.out)
    except ConfigError as exc:
        print(f"mode_table.py: error: {exc}", file=sys.stderr)
        return 2
    measured = measured_modes(args.paths)
    if args.world is not None:
        measured = measured[measured["world_size"] == args.world]
    table, left_out = check_cells(measured, args.within)
    if table.empty:
        print(f"mode_table.py: no cell with two validated modes under {', '.join(args.paths)} ({left_out})",
              file=sys.stderr)
        return 1
    if args.latest:
        table = latest_calls(table)
    lines = summary_lines(table, args.within)
    if any(left_out.values()):
        lines.append("left out: " + ", ".join(f"{n} cells ({why})" for why, n in left_out.items() if n))
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "modes.csv", index=False)
    md = to_markdown(table, lines, ", ".join(args.paths))
    (out / "modes.md").write_text(md)
    print(md)
    print(f"wrote {out / 'modes.csv'}\nwrote {out / 'modes.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
