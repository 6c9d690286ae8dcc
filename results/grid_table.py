"""Ours against every equal-output peer: one row per (shape, datatype, world size, family), a table and a figure.

    python results/grid_table.py results/logs/h200x2/grid-COMMIT --out results/figures/h200x2/grid-COMMIT

Reads every run log under the folders given (harness.runlog.read_records; old logs without the newer
fields are read too), plus LOGDIR/sweep_plan.json and LOGDIR/failures.json when results/sweep.py wrote
them, and writes into --out:
  grid.csv           every column, numbers unrounded
  grid.md            the same as a Markdown table, the geomean of the ratios, and a note per failure
  grid_<dev>_w<W>.png  one bar group per cell (shape, datatype): ours / best peer per family, a line at 1.0

Families (the runs of one family end with the same output; each is compared with its equal-output peers only):
  reduce:  the whole C on every rank. The best validated run of our all_reduce and one_shot (any mode), against
           the reference all_reduce (cuBLAS + NCCL), symm_mem_one_shot and symm_mem_two_shot (cuBLAS + torch
           symm-mem);
  gather:  the whole C on every rank. Our all_scatter, against the reference all_gather (cuBLAS + NCCL);
  ag_gemm: C[:, the rank's N/W columns] (A row-sharded and gathered, B column-sharded). Our all_gather_gemm,
           against torch's fused_all_gather_matmul and all_gather_then_gemm (NCCL all_gather of A, then cuBLAS);
  gemm_rs: the rank's M/W rows of the summed C (K split). Our gemm_reduce_scatter, against torch's
           fused_matmul_reduce_scatter and gemm_then_reduce_scatter (cuBLAS, then NCCL reduce_scatter).
torch's fused_all_gather_matmul is ag_gemm's peer; beside the gather family it is shown as well, marked as a
different output (a column shard of C, not the whole C), and never counted as gather's peer.

ratio = best peer ms / ours ms (> 1: ours is faster). Timing basis per row: `loop` (timing.loop_ms, steps
back to back) when ours and every peer with a time have it, else `isolated` (timing.e2e_ms, the median of
isolated steps); spreads are p10-p90 of the same measure. A family whose planned runs left no validated,
timed log is a failure row (FAIL), never dropped. A row is one (cell, family); the geomean is over every row
with a ratio, all families pooled, and per family. `interpreted`: ours ran on the CPU backend (Triton's
interpreter), so its ratio to the peers (torch and gloo on the CPU) says nothing of a GPU's; the figure's title
says so.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from streamk_pgas import spec
from streamk_pgas.harness.checks import ConfigError, OneLineParser
from streamk_pgas.harness.runlog import read_records

FAMILY = {name: alg.family.name for name, alg in spec.ALGORITHMS.items()}  # our algorithm -> its family
FAMILIES = tuple(dict.fromkeys(FAMILY.values()))
# What each family's runs end with on each rank: ours and its peers alike.
FAMILY_OUTPUT = {f: spec.FAMILIES[f].text for f in FAMILIES}
# Equal-output peers of each family: the reference variants (spec.BASELINES) that end with the family's output.
PEERS: dict[str, tuple[str, ...]] = {f: spec.peers(f) for f in FAMILIES}
VARIANT_HELP = {key: b.text for key, b in spec.BASELINES.items()}
# Reference variants shown beside a family that end with a different output (never that family's peers).
OTHER_OUTPUT: dict[str, tuple[str, ...]] = {"reduce": (), "gather": ("fused_all_gather_matmul",), "ag_gemm": (),
                                            "gemm_rs": ()}
OTHER_OUTPUT_NOTE = {"fused_all_gather_matmul": "ends with a column shard of C (M x N/W per rank), not the whole C"}
OTHER_SHORT = {"fused_all_gather_matmul": "a column shard of C"}
ALL_PEERS = tuple(dict.fromkeys(v for f in FAMILIES for v in PEERS[f]))
ALL_OTHER = tuple(dict.fromkeys(v for f in FAMILIES for v in OTHER_OUTPUT[f]))
FAMILY_COLORS = {"reduce": "#4c72b0", "gather": "#55a868", "ag_gemm": "#8172b2", "gemm_rs": "#dd8452"}
OTHER_COLOR = "0.7"
CELL_KEYS = ["m", "n", "k", "datatype", "world_size"]


# ------------------------------------------------------------------------------------------ reading
def _num(*values: Any) -> float:
    """The first value that is a finite number (NaN if none)."""
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(x):
            return x
    return math.nan


def record_row(rec: dict[str, Any]) -> dict[str, Any]:
    """One run log as a flat row; tolerant of logs written before loop timing and spreads existed."""
    sizes, flags = rec.get("sizes") or {}, rec.get("flags") or {}
    timing, validation = rec.get("timing") or {}, rec.get("validation") or {}
    e2e_stats, loop = timing.get("e2e_stats") or {}, timing.get("loop") or {}
    producer = rec.get("producer")
    variant = rec.get("variant") or flags.get("variant")
    layout = rec.get("gather_layout") or flags.get("gather_layout") or "row_major"
    if variant == "all_gather" and layout != "row_major":
        variant = "all_gather_rank_blocked"  # stops at the [W, M, N/W] buffer: not the whole C, not a peer
    e2e = _num(timing.get("e2e_ms"), timing.get("e2e_median_ms"), e2e_stats.get("median"))
    if producer == "reference" and rec.get("skipped"):
        status = f"skipped: {rec['skipped']}"
    elif producer == "reference" and rec.get("failed"):
        status = f"failed: {rec['failed']}"
    elif math.isnan(e2e):
        status = "not timed"
    elif validation.get("passed") is True:
        status = "ok"
    elif validation.get("passed") is False:
        status = "validation failed"
    else:
        status = "not validated"
    mode = rec.get("mode")
    plan = flags.get("plan") if isinstance(flags.get("plan"), dict) else {}
    asked = "auto" if "mode" in (plan.get("planned") or []) else flags.get("mode")  # the planner chose the mode
    return {
        "producer": producer,
        "algorithm": rec.get("algorithm"),
        "family": FAMILY.get(str(rec.get("algorithm"))) if producer == "benchmark" else None,
        "variant": variant if producer == "reference" else None,
        "mode": f"{mode} (auto)" if asked == "auto" and mode != "auto" else mode,
        "gemm_sms": flags.get("gemm_sms") if producer == "benchmark" else None,
        "m": sizes.get("m", flags.get("m")), "n": sizes.get("n", flags.get("n")), "k": sizes.get("k", flags.get("k")),
        "datatype": sizes.get("datatype", flags.get("datatype")),
        "world_size": rec.get("world_size"),
        "device": (rec.get("device") or {}).get("name") or "?",
        "backend": (rec.get("device") or {}).get("backend"),  # "cpu": ours ran in Triton's interpreter
        "e2e_ms": e2e,
        "e2e_p10": _num(timing.get("e2e_p10_ms"), e2e_stats.get("p10")),
        "e2e_p90": _num(timing.get("e2e_p90_ms"), e2e_stats.get("p90")),
        "loop_ms": _num(timing.get("loop_ms"), loop.get("median")),
        "loop_p10": _num(loop.get("p10")),
        "loop_p90": _num(loop.get("p90")),
        "status": status,
        "path": rec.get("_path"),
    }


def _read_json(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def read_sweep(paths: list[str | Path]) -> tuple[pd.DataFrame, dict[str, Any], dict[str, Any]]:
    """(one row per run log, the planned runs by name, the failed runs by name) under `paths`."""
    rows = [record_row(r) for r in read_records(list(paths))]
    df = pd.DataFrame(rows, columns=list(record_row({}).keys()))
    planned: dict[str, Any] = {}
    failures: dict[str, Any] = {}
    for p in map(Path, paths):
        folder = p if p.is_dir() else p.parent
        planned.update(_read_json(folder / "sweep_plan.json").get("runs") or {})
        failures.update(_read_json(folder / "failures.json"))
    return df, planned, failures


# ------------------------------------------------------------------------------------------- table
def _why_failed(name: str, failures: dict[str, Any]) -> str:
    f = failures.get(name)
    if not f:
        return "no log (not run yet, or interrupted)"
    tail = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", str(f.get("output_tail", "")))  # NULs, colour codes
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    for pattern in (r"\w(Error|Exception|Interrupt): ", r"\berror:", r"FAILED|Killed|killed after|[Tt]imed? ?out"):
        found = [ln for ln in lines if re.search(pattern, ln)]
        if found:
            text = found[0]
            break
    else:
        text = lines[-1] if lines else ""
    return f"exit {f.get('returncode')}: {text[:160]}"


def _spread(p10: float, p90: float) -> str:
    return f"{p10:.4g}-{p90:.4g}" if not (math.isnan(p10) or math.isnan(p90)) else ""


def _measure(row: pd.Series | dict[str, Any], basis: str) -> tuple[float, float, float]:
    key = "loop" if basis == "loop" else "e2e"
    return row[f"{key}_ms"], row[f"{key}_p10"], row[f"{key}_p90"]


def build_table(df: pd.DataFrame, planned: dict[str, Any] | None = None, failures: dict[str, Any] | None = None,
                allow_unvalidated: bool = False) -> pd.DataFrame:
    """One row per (cell, family) that was planned or has a log. See the module doc for the columns' meaning."""
    planned, failures = planned or {}, failures or {}
    usable = {"ok", "not validated"} if allow_unvalidated else {"ok"}
    cells: dict[tuple[Any, ...], dict[str, Any]] = {}

    def cell(key: tuple[Any, ...]) -> dict[str, Any]:
        return cells.setdefault(key, {"order": math.inf, "families": set(), "ours_planned": {}, "refs_planned": {},
                                      "first": {}})

    for name, run in planned.items():
        c = run.get("cell") or {}
        if any(c.get(k) is None for k in CELL_KEYS):
            continue
        entry = cell((int(c["m"]), int(c["n"]), int(c["k"]), str(c["datatype"]), int(c["world_size"])))
        entry["order"] = min(entry["order"], c.get("index", math.inf))
        side = "ours" if run.get("kind") == "benchmark" else "peers"
        entry["first"][side] = min(entry["first"].get(side, math.inf), run.get("order", math.inf))
        if run.get("kind") == "benchmark":
            fam = run.get("family") or FAMILY.get(str(run.get("algorithm")))
            entry["families"].add(fam)
            entry["ours_planned"].setdefault(fam, []).append(name)
        else:
            for v in run.get("variants") or []:
                entry["refs_planned"][v] = name
    for _, r in df.iterrows():
        if any(pd.isna(r[k]) for k in CELL_KEYS):
            continue
        entry = cell((int(r["m"]), int(r["n"]), int(r["k"]), str(r["datatype"]), int(r["world_size"])))
        if isinstance(r["family"], str):
            entry["families"].add(r["family"])

    rows = []
    for key, entry in cells.items():
        m, n, k, dt, w = key
        in_cell = df[(df["m"] == m) & (df["n"] == n) & (df["k"] == k) & (df["datatype"] == dt)
                     & (df["world_size"] == w)]
        devices = sorted(set(in_cell["device"].dropna()))
        for fam in sorted(entry["families"], key=FAMILIES.index):
            ours = in_cell[in_cell["family"] == fam]
            ours_ok = ours[ours["status"].isin(usable)]
            notes: list[str] = []
            peer_info: dict[str, dict[str, Any]] = {}
            for v in PEERS[fam] + OTHER_OUTPUT[fam]:
                recs = in_cell[in_cell["variant"] == v]
                ok = recs[recs["status"].isin(usable)]
                if not ok.empty:
                    peer_info[v] = {"status": "ok", "row": ok.loc[ok["e2e_ms"].idxmin()]}
                elif not recs.empty:
                    peer_info[v] = {"status": str(recs.iloc[0]["status"]), "row": None}
                elif v in entry["refs_planned"]:
                    peer_info[v] = {"status": "missing: " + _why_failed(entry["refs_planned"][v], failures),
                                    "row": None}
                else:
                    peer_info[v] = {"status": "not run", "row": None}
            peers_ok = [v for v in PEERS[fam] if peer_info[v]["status"] == "ok"]
            # loop figures on both sides (a side without a usable run does not decide it)
            has_loop = (ours_ok.empty or ours_ok["loop_ms"].notna().any()) and bool(peers_ok) and all(
                not math.isnan(peer_info[v]["row"]["loop_ms"]) for v in peers_ok)
            basis = "loop" if has_loop else "isolated"
            col = "loop_ms" if has_loop else "e2e_ms"
            timed = ours_ok[ours_ok[col].notna()]
            row: dict[str, Any] = {"shape": f"{m}x{n}x{k}", "m": m, "n": n, "k": k, "datatype": dt, "world_size": w,
                                   "family": fam, "output": FAMILY_OUTPUT[fam], "peers": ",".join(PEERS[fam]),
                                   "device": ", ".join(devices) or "?", "timing": basis,
                                   "interpreted": bool((ours["backend"] == "cpu").any())}
            if timed.empty:
                best = None
                why = []
                for name in entry["ours_planned"].get(fam, []):
                    if not any(Path(str(p)).stem == name for p in ours["path"]):
                        why.append(f"{name}: {_why_failed(name, failures)}")
                for _, r in ours.iterrows():
                    why.append(f"{r['algorithm']} {r['mode']}: {r['status']}")
                row.update(ours_ms=math.nan, ours_p10=math.nan, ours_p90=math.nan, ours_run="",
                           ours_status="FAIL: " + ("; ".join(why) if why else "no run"))
                notes += why
            else:
                best = timed.loc[timed[col].idxmin()]
                ms, p10, p90 = _measure(best, basis)
                g = best["gemm_sms"]
                run = f"{best['algorithm']} {best['mode']}" + ("" if g is None or pd.isna(g) else f" g{int(g)}")
                row.update(ours_ms=ms, ours_p10=p10, ours_p90=p90, ours_run=run, ours_status="ok")
                bad = ours[~ours["status"].isin(usable)]
                for _, r in bad.iterrows():
                    notes.append(f"{r['algorithm']} {r['mode']}: {r['status']}")
                for name in entry["ours_planned"].get(fam, []):
                    if not any(Path(str(p)).stem == name for p in ours["path"]):
                        notes.append(f"{name}: {_why_failed(name, failures)}")
            for v in PEERS[fam] + OTHER_OUTPUT[fam]:
                info = peer_info[v]
                if info["row"] is not None:
                    ms, p10, p90 = _measure(info["row"], basis)
                else:
                    ms = p10 = p90 = math.nan
                row.update({f"{v}_ms": ms, f"{v}_p10": p10, f"{v}_p90": p90, f"{v}_status": info["status"]})
                if info["status"] not in ("ok", "not run") and not info["status"].startswith("skipped"):
                    notes.append(f"peer {v}: {info['status']}")
            timed_peers = [(row[f"{v}_ms"], v) for v in peers_ok if not math.isnan(row[f"{v}_ms"])]
            if timed_peers:
                row["best_peer_ms"], row["best_peer"] = min(timed_peers)
            else:
                row["best_peer_ms"], row["best_peer"] = math.nan, ""
            row["ratio"] = (row["best_peer_ms"] / row["ours_ms"]
                            if best is not None and timed_peers and row["ours_ms"] > 0 else math.nan)
            for v in OTHER_OUTPUT[fam]:
                row[f"ours_vs_{v}"] = row[f"{v}_ms"] / row["ours_ms"] if best is not None else math.nan
            flags = []
            if best is None:
                flags.append("FAIL")
            elif not math.isnan(row["ratio"]) and row["ratio"] < 1.0:
                flags.append("LOSS")
            if any(row[f"{v}_status"] not in ("ok", "not run") and not row[f"{v}_status"].startswith("skipped")
                   for v in PEERS[fam]):
                flags.append("PEER FAIL")
            if not timed_peers:
                flags.append("NO PEER")
            row["flag"] = ", ".join(flags) or "ok"
            first = entry["first"]
            row["ran_first"] = ("" if "ours" not in first or "peers" not in first
                                else "ours" if first["ours"] < first["peers"] else "peers")
            row["notes"] = "; ".join(notes)
            row["_order"] = entry["order"]
            rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    known = sorted(set(out["device"]) - {"?"})
    if len(known) == 1:  # a cell none of whose runs left a log ran on the sweep's one device too
        out["device"] = known[0]
    out = out.sort_values(["world_size", "_order", "m", "n", "k", "datatype", "family"],
                          key=lambda s: s.map(FAMILIES.index) if s.name == "family" else s).drop(columns="_order")
    return out.reset_index(drop=True)


def geomean(values: pd.Series) -> float:
    v = [float(x) for x in values if x is not None and not pd.isna(x) and x > 0]
    return math.exp(sum(map(math.log, v)) / len(v)) if v else math.nan


def summarize(table: pd.DataFrame) -> dict[str, Any]:
    """Counts over the rows (one per cell and family) and the geomean of the ratios over the rows that have one,
    every family pooled (`geomean`) and per family (`geomean_by_family`, with `rows_by_family` and
    `with_ratio_by_family`: how many rows each has, and how many of them have a ratio)."""
    if table.empty:
        return {"rows": 0, "with_ratio": 0, "losses": 0, "failures": 0, "peer_failures": 0, "no_peer": 0,
                "geomean": math.nan, "geomean_by_family": {}, "cells": 0, "families": [], "rows_by_family": {},
                "with_ratio_by_family": {}}
    flags = table["flag"].astype(str)
    by_family = sorted(table.groupby("family", sort=False), key=lambda fg: FAMILIES.index(fg[0]))  # FAMILIES' order
    return {
        "rows": len(table),
        "cells": len(table[["shape", "datatype", "world_size"]].drop_duplicates()),
        "families": [f for f in FAMILIES if (table["family"] == f).any()],
        "with_ratio": int(table["ratio"].notna().sum()),
        "rows_by_family": {f: len(g) for f, g in by_family},
        "with_ratio_by_family": {f: int(g["ratio"].notna().sum()) for f, g in by_family},
        "losses": int(flags.str.contains("LOSS").sum()),
        "failures": int(flags.str.contains(r"\bFAIL\b", regex=True).sum()),
        "peer_failures": int(flags.str.contains("PEER FAIL").sum()),
        "no_peer": int(flags.str.contains("NO PEER").sum()),
        "geomean": geomean(table["ratio"]),
        "geomean_by_family": {f: geomean(g["ratio"]) for f, g in by_family},
    }


def _ms_cell(row: pd.Series, v: str, peer: bool = True) -> str:
    """v's time in this row: in a peer column (peer=True) only where v is an equal-output peer of the row's family,
    in a † column only where v is shown beside it as a different output (fused_all_gather_matmul is both)."""
    if v not in (PEERS if peer else OTHER_OUTPUT).get(row.get("family"), ()):
        return ""
    status = row.get(f"{v}_status")
    if status is None or (isinstance(status, float) and math.isnan(status)):
        return ""
    if status != "ok":
        status = str(status)
        return status.split(":")[0] if status.startswith(("skipped", "not run")) else status.split(":")[0].upper()
    spread = _spread(row[f"{v}_p10"], row[f"{v}_p90"])
    return f"{row[f'{v}_ms']:.4g}" + (f" ({spread})" if spread else "")


def to_markdown(table: pd.DataFrame, summary: dict[str, Any], source: str) -> str:
    lines = [f"# Ours vs the best equal-output peer ({source})", ""]
    if table.empty:
        return "\n".join([*lines, "(no planned runs and no run logs found)", ""])
    gm = summary["geomean"]
    by_fam = ", ".join(f"{f} {g:.3f}x ({summary['with_ratio_by_family'][f]} of {summary['rows_by_family'][f]} rows)"
                       for f, g in summary["geomean_by_family"].items() if not math.isnan(g))
    lines += [
        f"**geomean {gm:.3f}x over {summary['with_ratio']} of {summary['rows']} rows with a ratio, all families "
        f"pooled** (a row is one cell and one family: {summary['cells']} cell{'s' * (summary['cells'] != 1)} x "
        f"the families {', '.join(summary['families'])}); per family: {by_fam}; "
        f"losses (< 1.0): {summary['losses']}; failures (FAIL: no validated, timed run of ours): "
        f"{summary['failures']}; rows with a failed or missing peer: {summary['peer_failures']}; rows without "
        f"any peer: {summary['no_peer']}."
        if not math.isnan(gm) else
        f"**no row has a ratio**; failures: {summary['failures']}; rows without any peer: {summary['no_peer']}.",
        "",
        "ratio = best peer / ours (> 1: ours faster). ms with (p10-p90). timing: `loop` = back-to-back steps "
        "(timing.loop_ms) where ours and every peer have it, else `isolated` = median of isolated steps "
        "(timing.e2e_ms). first: which side this cell ran first (the sweep alternates).",
        "",
    ]
    families = [f for f in FAMILIES if (table["family"] == f).any()]
    peers = [v for v in ALL_PEERS if any(v in PEERS[f] for f in families)]
    others = [v for v in ALL_OTHER if any(v in OTHER_OUTPUT[f] for f in families)]
    head = ["shape", "dtype", "W", "family", "ours ms (p10-p90)", "ours run", *peers, "best peer", "ratio", "flag",
            "timing", "first", *[f"{v} †" for v in others]]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in table.iterrows():
        ours = ("**FAIL**" if r["flag"].startswith("FAIL") else
                f"{r['ours_ms']:.4g}" + (f" ({_spread(r['ours_p10'], r['ours_p90'])})"
                                         if _spread(r["ours_p10"], r["ours_p90"]) else ""))
        ratio = "-" if pd.isna(r["ratio"]) else (f"**{r['ratio']:.3f}**" if r["ratio"] < 1 else f"{r['ratio']:.3f}")
        cells = [r["shape"], r["datatype"], str(r["world_size"]), r["family"], ours, r["ours_run"] or "-",
                 *[_ms_cell(r, v) or "n/a" for v in peers], r["best_peer"] or "-", ratio,
                 r["flag"] if r["flag"] == "ok" else f"**{r['flag']}**", r["timing"], r["ran_first"] or "-",
                 *[_ms_cell(r, v, peer=False) or "n/a" for v in others]]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    lines += ["", "Families (ours: the algorithms; each row is compared with its family's equal-output peers only):"]
    for f in families:
        algs = ", ".join(f"`{a}`" for a, fam in FAMILY.items() if fam == f)
        lines.append(f"- {f} ({algs}): ends with {FAMILY_OUTPUT[f]}; peers: "
                     + ", ".join(f"`{v}`" for v in PEERS[f]))
    lines += ["", "Peers:"]
    lines += [f"- `{v}`: {VARIANT_HELP.get(v, v)}" for v in peers]
    for v in others:
        peer_of = [f for f in families if v in PEERS[f]]
        lines.append(f"- † `{v}` beside {', '.join(f for f in families if v in OTHER_OUTPUT[f])} is **not a peer** "
                     f"there (different output: {OTHER_OUTPUT_NOTE.get(v, 'not the whole C')})"
                     + (f"; it is {', '.join(peer_of)}'s peer" if peer_of else "") + f": {VARIANT_HELP.get(v, v)}")
    lines.append("- n/a: not a peer of that family; skipped: the reference cannot run on this machine "
                 "(its reason is in grid.csv); not run: neither planned nor logged; MISSING / FAILED / "
                 "VALIDATION FAILED / NOT VALIDATED: planned or logged, but no usable log (see the notes).")
    noted = table[table["notes"].astype(str) != ""]
    if not noted.empty:
        lines += ["", "Notes (failed or unvalidated runs, never dropped):"]
        for _, r in noted.iterrows():
            lines.append(f"- {r['shape']} {r['datatype']} W={r['world_size']} {r['family']}: {r['notes']}")
    devices = sorted(set(table["device"]))
    lines += ["", f"Device(s): {', '.join(devices)}.", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ figure
def _slug(*parts: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.x-]+", "-", "_".join(str(p) for p in parts)).strip("-")


def _cell_label(r: pd.Series) -> str:
    return f"M {r['m']}\nN {r['n']}\nK {r['k']}\n{r['datatype']}"


def grid_figure(table: pd.DataFrame, title: str = "") -> Figure:
    """One bar group per cell: ours / best peer for each family, and ours / each different-output op (hatched)."""
    cells = list(dict.fromkeys((r["m"], r["n"], r["k"], r["datatype"]) for _, r in table.iterrows()))
    series: list[tuple[str, str, str, str | None]] = []  # (label, family, column, hatch)
    for fam in FAMILIES:
        if (table["family"] == fam).any():
            algs = ", ".join(a for a, f in FAMILY.items() if f == fam)
            series.append((f"{fam} ({algs}):\nours vs its best equal-output peer", fam, "ratio", None))
            for v in OTHER_OUTPUT[fam]:
                col = f"ours_vs_{v}"
                if col in table.columns and table.loc[table["family"] == fam, col].notna().any():
                    series.append((f"{fam}: ours vs torch {v}\n(different output: {OTHER_SHORT.get(v, v)}; not a peer)",
                                   fam, col, "//"))
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.42 * len(cells) * max(1, len(series)) + 2.0), 5.0))
    ymax = 1.2
    for j, (label, fam, col, hatch) in enumerate(series):
        xs, ys, texts = [], [], []
        for i, c in enumerate(cells):
            sel = table[(table["m"] == c[0]) & (table["n"] == c[1]) & (table["k"] == c[2])
                        & (table["datatype"] == c[3]) & (table["family"] == fam)]
            if sel.empty:
                continue
            r = sel.iloc[0]
            x = i - 0.4 + width * (j + 0.5)
            v = r[col]
            if pd.isna(v):
                word = "FAIL" if str(r["flag"]).startswith("FAIL") else "no peer" if col == "ratio" else "n/a"
                ax.text(x, 0.03, word, rotation=90, ha="center", va="bottom", fontsize=7,
                        color="#c44e52" if word == "FAIL" else "0.4")
                continue
            xs.append(x)
            ys.append(float(v))
            texts.append(f"{float(v):.2f}" if float(v) >= 0.1 else f"{float(v):.2g}")
        color = OTHER_COLOR if hatch else FAMILY_COLORS[fam]
        ax.bar(xs, ys, width=width * 0.92, color=color, hatch=hatch, edgecolor="black", linewidth=0.5, label=label)
        for x, y, t in zip(xs, ys, texts):
            ax.text(x, y + 0.01, t, rotation=90, ha="center", va="bottom", fontsize=7,
                    color="#c44e52" if y < 1 and not hatch else "black")
        ymax = max([ymax, *[y * 1.18 for y in ys]])
    ax.axhline(1.0, color="black", linewidth=1.0, linestyle="--", label="1.0 (as fast as the peer)")
    ax.set_xticks(range(len(cells)), [_cell_label(pd.Series(dict(zip(["m", "n", "k", "datatype"], c))))
                                      for c in cells], fontsize=8)
    ax.set_xlim(-0.6, len(cells) - 0.4)
    ax.set_ylim(0, ymax)
    ax.set_ylabel("speed-up of ours: peer ms / ours ms (> 1: ours faster)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def plot_grid(table: pd.DataFrame, out: Path, summary: dict[str, Any] | None = None) -> list[Path]:
    """grid_<device>_w<W>.png per (device, world size)."""
    written = []
    for (device, w), t in table.groupby(["device", "world_size"], sort=True):
        s = summarize(t)
        gm = ", ".join(f"{f} {g:.2f}x" for f, g in s["geomean_by_family"].items() if not math.isnan(g))
        basis = "/".join(sorted(set(t["timing"])))
        title = (f"Ours vs the best equal-output peer: {device}, world size {w}, timing: {basis}\n"
                 f"geomean {s['geomean']:.2f}x over the {s['with_ratio']} of {s['rows']} rows (cell x family) with a "
                 f"ratio, all families pooled; per family: {gm}\nlosses: {s['losses']}, failures: {s['failures']}")
        if "interpreted" in t.columns and t["interpreted"].any():
            title += ("\nCPU: ours ran in Triton's interpreter, the peers on torch and gloo: these ratios say nothing "
                      "of a GPU's")
        fig = grid_figure(t, title)
        path = out / f"grid_{_slug(device)}_w{w}.png"
        fig.savefig(path, dpi=130, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


# --------------------------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="results/grid_table.py", description=__doc__.split("\n\n")[0],
                      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("paths", nargs="+", help="sweep folders (or run-log files), searched recursively")
    p.add_argument("--out", default=None, help="folder for grid.csv, grid.md and grid_*.png (default: the first path)")
    p.add_argument("--allow_unvalidated", action="store_true",
                   help="count timed runs that were not validated (old logs); a failed validation never counts")
    return p


def log_paths_and_out(paths: list[str], out: str | None) -> Path:
    """The folder a table of the logs at `paths` goes to (--out, default the first path); ConfigError where a path
    does not exist or --out is a file."""
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise ConfigError("paths", f"{missing[0]} does not exist")
    folder = Path(out) if out else Path(paths[0])
    if folder.is_file():
        raise ConfigError("--out", f"{folder} is a file, give a folder")
    return folder


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        out = log_paths_and_out(args.paths, args.out)
    except ConfigError as exc:
        print(f"grid_table.py: error: {exc}", file=sys.stderr)
        return 2
    df, planned, failures = read_sweep(args.paths)
    table = build_table(df, planned, failures, allow_unvalidated=args.allow_unvalidated)
    if table.empty:
        print(f"grid_table.py: no planned runs and no benchmark run logs under {', '.join(args.paths)}",
              file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(table)
    table.to_csv(out / "grid.csv", index=False)
    md = to_markdown(table, summary, ", ".join(args.paths))
    (out / "grid.md").write_text(md)
    written = [out / "grid.csv", out / "grid.md", *plot_grid(table, out, summary)]
    print(md)
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
