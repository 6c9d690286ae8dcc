"""Figures and a summary table from JSON run logs (benchmark.py and reference/) and tile timelines.

    python results/plot.py results/logs [more logs or folders ...] --out results/figures

Reads every run-log record (harness.runlog.read_records) into a pandas table, prints it with the
speed-up over the matching vendor baseline (all_reduce and one_shot vs the library all_reduce,
all_scatter vs the library all_gather, same device, world size, datatype and shape), saves it as
summary.csv, and draws with matplotlib (Agg):
  bars_*.png    per shape: end-to-end time (whiskers: p10-p90) and throughput per GPU of every algorithm
                and mode (best --gemm_sms), beside the references (grey, hatched), one row each (12 in wide at
                any count); CPU runs of ours (Triton's interpreter) hatched, labelled, and with no throughput
  sweep_*.png   per shape with several --gemm_sms values: time vs gemm_sms per algorithm and mode,
                references as horizontal lines
  gantt_*.png   per tile-timeline JSON (harness/trace.py) found among the inputs or given with
                --timeline: one row per rank and program, GEMM tiles, waits and communication tiles
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib
import matplotlib.text

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from streamk_pgas import spec
from streamk_pgas.harness.runlog import flops_unit, read_records
from streamk_pgas.harness.trace import TIMELINE_SCHEMA, read_timeline

# Benchmark algorithm -> the reference algorithm it is compared with.
# A run's algorithm -> the "algorithm" of its family's vendor pair (spec.baselines), its speed-up reference: ours
# and the vendor pairs' own records (of the families ours are in: the GEMM alone is no one's reference).
_OURS = {alg.family.name for alg in spec.ALGORITHMS.values()}
MATCHING_REFERENCE = {
    **{name: pair.collective for name, alg in spec.ALGORITHMS.items()
       if (pair := spec.vendor_pair(alg.family.name)) is not None},
    **{b.collective: b.collective for b in spec.BASELINES.values() if b.vendor_pair and b.family.name in _OURS},
}
MODE_COLORS = {"bulk_sync": "#4c72b0", "two_streams": "#dd8452", "fused": "#55a868", "fused_sequential": "#c44e52"}
ALGORITHM_STYLES = {"all_reduce": ("-", "o"), "one_shot": ("--", "s"), "all_scatter": (":", "^")}
REFERENCE_COLOR = "0.65"
REFERENCE_HATCH = "//"
INTERPRETER_HATCH = ".."
BAR_FIGURE_WIDTH_IN = 12.0  # bar charts: 1560 px at BAR_DPI, whatever the number of runs (rows grow downwards)
BAR_DPI = 130
ROLE_COLORS = {"gemm": "#4c72b0", "wait": "#e8c07d", "comm": "#55a868"}
GROUP_KEYS = ["device", "world_size", "datatype", "shape"]
TABLE_COLUMNS = ["producer", "algorithm", "implementation", "mode", "options", "shape", "datatype", "world_size",
                 "gemm_sms", "e2e_ms", "tflops", "speedup", "valid", "device"]


# ----------------------------------------------------------------------------------------- table
def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def _options(flags: dict[str, Any]) -> str:
    """benchmark.py choices that set runs of one algorithm and mode apart (A/B logs stay apart in the figures)."""
    tags = []
    if flags.get("sk_first") is True:
        tags.append("sk_first")
    if flags.get("sk_rounds", 1) not in (None, 1):
        tags.append(f"{flags['sk_rounds']} rounds")
    if flags.get("gemm_joins_comm") is False:
        tags.append("no join")
    if flags.get("start_sync") == "host":
        tags.append("host sync")
    if flags.get("schedule") not in (None, "hybrid"):
        tags.append(str(flags["schedule"]))
    return ", ".join(tags)


def _row(rec: dict[str, Any]) -> dict[str, Any]:
    sizes, flags, timing = rec.get("sizes", {}), rec.get("flags", {}), rec.get("timing", {})
    kernels = timing.get("kernels_ms") or {}
    m, n, k = sizes.get("m"), sizes.get("n"), sizes.get("k")
    return {
        "producer": rec.get("producer"),
        "algorithm": rec.get("algorithm"),
        "implementation": rec.get("implementation"),
        "mode": rec.get("mode"),
        "options": _options(flags) if rec.get("producer") == "benchmark" else "",
        "variant": rec.get("variant"),
        "m": m, "n": n, "k": k,
        "shape": f"{m}x{n}x{k}",
        "datatype": sizes.get("datatype"),
        "world_size": rec.get("world_size"),
        "device": (rec.get("device") or {}).get("name", "?"),
        "gemm_sms": _num(flags.get("gemm_sms")) if rec.get("producer") != "reference" else math.nan,
        "total_sms": _num(flags.get("total_sms")),
        "e2e_ms": _num(timing.get("e2e_ms")),
        "e2e_p10": _num(timing.get("e2e_p10_ms")),  # the spread of the isolated steps (absent in old logs)
        "e2e_p90": _num(timing.get("e2e_p90_ms")),
        "tflops": _num(timing.get("tflops")),
        "gemm_ms": _num(kernels.get("gemm")),
        "comm_ms": _num(kernels.get("comm")),
        "valid": (rec.get("validation") or {}).get("passed"),
        "skipped": rec.get("skipped"),
        "vendor_baseline": bool(rec.get("vendor_baseline")) and rec.get("gather_layout", "row_major") == "row_major",
        # ours on the CPU backend: kernels in Triton's interpreter (the references there are torch and gloo)
        "interpreted": rec.get("producer") != "reference" and (rec.get("device") or {}).get("backend") == "cpu",
        "path": rec.get("_path"),
    }


def load_table(paths: list[str | Path]) -> pd.DataFrame:
    """Every run-log record under `paths` as one row; skipped runs and runs without a time are dropped."""
    rows = [_row(r) for r in read_records(list(paths))]
    df = pd.DataFrame(rows, columns=list(_row({}).keys()))
    if df.empty:
        return df
    df = df[df["skipped"].isna() & df["e2e_ms"].notna()].copy()
    df["gemm_sms"] = df["gemm_sms"].astype("Int64")
    return add_speedups(df).reset_index(drop=True)


def add_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """speedup = e2e of the matching vendor baseline / e2e (> 1: faster than the library)."""
    refs = df[(df["producer"] == "reference") & df["vendor_baseline"]]
    best = refs.groupby(["algorithm", *GROUP_KEYS])["e2e_ms"].min().to_dict()

    def speedup(row: pd.Series) -> float:
        ref_alg = MATCHING_REFERENCE.get(row["algorithm"])
        ref = best.get((ref_alg, row["device"], row["world_size"], row["datatype"], row["shape"]))
        return ref / row["e2e_ms"] if ref and row["e2e_ms"] > 0 else math.nan

    df["speedup"] = df.apply(speedup, axis=1) if not df.empty else []
    return df


def format_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "(no timed runs)"
    cols = [c for c in TABLE_COLUMNS if c in df.columns]
    view = df.sort_values(["device", "world_size", "datatype", "shape", "producer", "algorithm", "mode",
                           "options", "gemm_sms"], na_position="first")[cols]
    return view.to_string(index=False, float_format=lambda x: f"{x:.3f}", na_rep="-")


# --------------------------------------------------------------------------------------- figures
def _slug(*parts: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.x-]+", "-", "_".join(str(p) for p in parts)).strip("-")


def _title(device: str, world_size: Any, datatype: str, shape: str, what: str) -> str:
    return f"{what}\n{device}, world size {world_size}, {datatype}, M x N x K = {shape.replace('x', ' x ')}"


def _bar_entries(group: pd.DataFrame) -> list[dict[str, Any]]:
    """One bar per benchmark (algorithm, mode) at its best gemm_sms, then one per reference; each with a one-line
    label."""
    entries = []
    bench = group[group["producer"] != "reference"]
    for (alg, mode, opts), g in bench.groupby(["algorithm", "mode", "options"], dropna=False, sort=True):
        row = g.loc[g["e2e_ms"].idxmin()]
        sms = "" if pd.isna(row["gemm_sms"]) else f" g={int(row['gemm_sms'])}"
        extra = f" · {opts}" if opts else ""
        entries.append({"label": f"{alg} {mode}{sms}{extra}", "row": row, "ref": False, "mode": str(mode),
                        "interpreted": bool(row["interpreted"]), "color": MODE_COLORS.get(str(mode), "#8172b2")})
    refs = group[group["producer"] == "reference"]
    for (alg, impl), g in refs.groupby(["algorithm", "implementation"], sort=True):
        row = g.loc[g["e2e_ms"].idxmin()]
        entries.append({"label": f"ref {alg} · {impl}", "row": row, "ref": True, "mode": "", "interpreted": False,
                        "color": REFERENCE_COLOR})
    return entries


def _value_text(v: float) -> str:
    """A bar's number: three significant digits, never in exponent form (the axis's unit is scaled to suit)."""
    if v == 0 or not math.isfinite(v):
        return f"{v:g}"
    v = float(f"{v:.3g}")
    digits = max(0, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{digits}f}"


def _draw_panel(ax: Any, entries: list[dict[str, Any]], values: list[float], xlabel: str, whiskers: bool) -> None:
    """Horizontal bars, one row per entry (top to bottom), each with its number at the bar's end."""
    y = list(range(len(entries)))
    finite = [v for v in values if math.isfinite(v) and v > 0]
    log = bool(finite) and max(finite) / min(finite) > 100  # bars 100x apart: a linear axis hides the short ones
    shown = [v if math.isfinite(v) else 0.0 for v in values]
    bars = ax.barh(y, shown, color=[e["color"] for e in entries], edgecolor="black", linewidth=0.6, height=0.7)
    for bar, e in zip(bars, entries):
        if e["ref"]:
            bar.set_hatch(REFERENCE_HATCH)
        elif e["interpreted"]:
            bar.set_hatch(INTERPRETER_HATCH)
            bar.set_alpha(0.55)
    ends = list(shown)
    for i, e in enumerate(entries):
        lo, hi, v = e["row"].get("e2e_p10", math.nan), e["row"].get("e2e_p90", math.nan), values[i]
        if whiskers and not (math.isnan(lo) or math.isnan(hi) or math.isnan(v)):
            ax.errorbar(v, i, xerr=[[max(0.0, v - lo)], [max(0.0, hi - v)]], fmt="none", ecolor="black",
                        elinewidth=0.8, capsize=2.5)
            ends[i] = max(v, hi)
    for i, (v, end) in enumerate(zip(values, ends)):
        if math.isfinite(v) and end > 0:
            ax.annotate(_value_text(v), (end, i), xytext=(3, 0), textcoords="offset points", ha="left", va="center",
                        fontsize=7)
        else:  # no bar: the word at the axis's left edge (axes coordinates: a log axis has no 0)
            ax.annotate("n/a" if not math.isfinite(v) else _value_text(v), (0, i), xycoords=ax.get_yaxis_transform(),
                        xytext=(3, 0), textcoords="offset points", ha="left", va="center", fontsize=7)
    if log:
        ax.set_xscale("log")
        lo = min(finite) / 2
        ax.set_xlim(lo, max(ends) * 8)
        xlabel += " (log scale)"
    else:
        ax.set_xlim(0, max([*ends, 1e-12]) * 1.22)  # room for the numbers after the longest bar
    ax.set_yticks(y, [e["label"] for e in entries], fontsize=7)
    ax.set_ylim(len(entries) - 0.5, -0.5)  # the first entry on top
    ax.set_xlabel(xlabel, fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", alpha=0.3)


def bar_figures(df: pd.DataFrame) -> Iterator[tuple[str, Any]]:
    """(file name, figure) per (device, world size, datatype, shape): end-to-end time and throughput per algorithm
    and mode beside the references, as horizontal bars (one labelled row each, so any number of runs stays
    BAR_FIGURE_WIDTH_IN wide); runs of ours in Triton's interpreter are hatched and labelled as such, with no
    throughput. The caller saves and closes each figure."""
    for (device, w, dt, shape), group in df.groupby(GROUP_KEYS, sort=True):
        entries = _bar_entries(group)
        if not entries:
            continue
        interpreted = any(e["interpreted"] for e in entries)
        for e in entries:
            if e["interpreted"]:
                e["label"] += " [interpreter]"
        fig, axes = plt.subplots(1, 2, figsize=(BAR_FIGURE_WIDTH_IN, 1.9 + 0.26 * len(entries)), sharey=True)
        _draw_panel(axes[0], entries, [float(e["row"]["e2e_ms"]) for e in entries], "end-to-end time (ms)", True)
        tflops = [math.nan if e["interpreted"] else float(e["row"]["tflops"]) for e in entries]
        scale, unit = flops_unit(tflops)
        _draw_panel(axes[1], entries, [v * scale for v in tflops], f"{unit} per GPU", False)
        axes[1].tick_params(axis="y", left=False)
        handles = [Patch(facecolor=c, edgecolor="black", label=m) for m, c in MODE_COLORS.items()
                   if any(e["mode"] == m for e in entries)]
        handles.append(Patch(facecolor=REFERENCE_COLOR, hatch=REFERENCE_HATCH, edgecolor="black",
                             label="reference (vendor library / torch)"))
        if interpreted:
            handles.append(Patch(facecolor="white", hatch=INTERPRETER_HATCH, edgecolor="black",
                                 label="ours in Triton's CPU interpreter: not comparable"))
        if any(not math.isnan(e["row"].get("e2e_p90", math.nan)) for e in entries):
            handles.append(Line2D([], [], color="black", marker="|", linestyle="none", markersize=8,
                                  label="whiskers: p10-p90 of the timed steps"))
        fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=min(len(handles), 4), frameon=False)
        title = _title(device, w, dt, shape, "Time and throughput per algorithm and mode")
        if interpreted:
            title += ("\nCPU: our kernels ran in Triton's interpreter (program after program): their times say nothing "
                      "of a GPU's\nand do not compare with the references' (torch and gloo on the CPU)")
        fig.suptitle(title, fontsize=9)
        legend_rows = math.ceil(len(handles) / 4)
        fig.tight_layout(rect=(0, (0.08 + 0.2 * legend_rows) / fig.get_figheight(), 1, 1))
        yield f"bars_{_slug(device, f'w{w}', dt, shape)}.png", fig


def plot_bars(df: pd.DataFrame, out: Path) -> list[Path]:
    """bar_figures' figures as PNGs in `out` (BAR_DPI: 1560 px wide)."""
    written = []
    for name, fig in bar_figures(df):
        fig.savefig(out / name, dpi=BAR_DPI)
        plt.close(fig)
        written.append(out / name)
    return written


def text_overlaps(fig: Any) -> list[tuple[str, str]]:
    """Pairs of texts of `fig` that are drawn (tick labels within their axis's limits, numbers, titles, legend
    entries) whose boxes overlap."""
    fig.draw_without_rendering()  # lays every text out (ticks included) without rasterizing
    renderer = fig.canvas.get_renderer()
    undrawn = set()  # labels of ticks outside the axis's view: made, but not drawn
    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = sorted(limits)
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                if not lo <= tick.get_loc() <= hi:
                    undrawn.update((id(tick.label1), id(tick.label2)))
    boxes = []
    for text in fig.findobj(matplotlib.text.Text):
        if id(text) in undrawn or not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        if box.width > 0 and box.height > 0:
            boxes.append((text.get_text(), box.expanded(0.98, 0.9)))  # antialiasing's fringe is not an overlap
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if ba.overlaps(bb)]


def plot_sweeps(df: pd.DataFrame, out: Path) -> list[Path]:
    written = []
    for (device, w, dt, shape), group in df.groupby(GROUP_KEYS, sort=True):
        bench = group[(group["producer"] != "reference") & group["gemm_sms"].notna()]
        if bench.empty or bench.groupby(["algorithm", "mode", "options"])["gemm_sms"].nunique().max() < 2:
            continue
        fig, ax = plt.subplots(figsize=(8, 5))
        for (alg, mode, opts), g in bench.groupby(["algorithm", "mode", "options"], sort=True):
            g = g.groupby("gemm_sms", as_index=False)["e2e_ms"].min().sort_values("gemm_sms")
            style = ALGORITHM_STYLES.get(str(alg), ("-", "o"))
            label = f"{alg} {mode}" + (f" ({opts})" if opts else "")
            ax.plot(g["gemm_sms"].astype(int), g["e2e_ms"], linestyle=style[0], marker=style[1], label=label,
                    color=MODE_COLORS.get(str(mode)))
        refs = group[group["producer"] == "reference"]
        for i, ((alg, impl), g) in enumerate(refs.groupby(["algorithm", "implementation"], sort=True)):
            ax.axhline(g["e2e_ms"].min(), color=str(0.2 + 0.12 * (i % 5)), linestyle=":" if i else "-.",
                       linewidth=1.2, label=f"ref {alg} {impl}")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("GEMM SMs (--gemm_sms; the rest communicate)")
        ax.set_ylabel("end-to-end time (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title(_title(device, w, dt, shape, "SM split sweep"), fontsize=10)
        fig.tight_layout()
        path = out / f"sweep_{_slug(device, f'w{w}', dt, shape)}.png"
        fig.savefig(path, dpi=130)
        plt.close(fig)
        written.append(path)
    return written


def plot_gantt(timeline: dict[str, Any], path: Path) -> Path:
    """Gantt chart of a tile timeline: one row per (rank, program); waits drawn on their program's row."""
    rows: dict[tuple[int, str, int], dict[str, list[tuple[float, float]]]] = {}
    for r in timeline["ranks"]:
        for ev in r["events"]:
            track = "gemm" if ev["role"] == "gemm" else "comm"
            spans = rows.setdefault((r["rank"], track, int(ev["pid"])), {"gemm": [], "wait": [], "comm": []})
            spans[ev["role"]].append((ev["start_us"], max(ev["dur_us"], 1e-9)))
    keys = sorted(rows, key=lambda key: (key[0], key[1] != "gemm", key[2]))  # per rank: GEMM programs first
    height = min(60.0, max(3.0, 0.12 * len(keys) + 1.8))
    fig, ax = plt.subplots(figsize=(12, height))
    for y, key in enumerate(keys):
        for role in ("gemm", "wait", "comm"):
            if rows[key][role]:
                ax.broken_barh(rows[key][role], (y - 0.4, 0.8), facecolors=ROLE_COLORS[role], linewidth=0)
    ax.set_yticks(range(len(keys)), [f"r{rk} {tr} {pid}" for rk, tr, pid in keys],
                  fontsize=max(3, min(8, int(400 / max(1, len(keys))))))
    ax.set_ylim(-1, len(keys))
    ax.invert_yaxis()
    unit = timeline.get("time_unit", "us")
    ax.set_xlabel("time (logical events)" if unit == "events" else "time (us)")
    ax.set_ylabel("rank, role, program id")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=[Patch(color=c, label=role) for role, c in ROLE_COLORS.items()], fontsize=8, loc="upper right")
    meta = timeline.get("meta", {})
    shape = "x".join(str(meta[d]) for d in ("m", "n", "k") if d in meta) or "?"
    what = (f"Tile timeline: {meta.get('algorithm', '?')} / {meta.get('mode', '?')}, "
            f"gemm_sms={meta.get('gemm_sms', '?')}, comm_sms={meta.get('comm_sms', '?')}, "
            f"tiles={meta.get('num_tiles', '?')} ({meta.get('BLK_M', '?')} x {meta.get('BLK_N', '?')})")
    ax.set_title(_title(str(meta.get("device", "?")), meta.get("world_size", len(timeline["ranks"])),
                        str(meta.get("datatype", "?")), shape, what), fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def find_timelines(paths: list[str | Path]) -> list[Path]:
    found = []
    for p in map(Path, paths):
        for f in (sorted(p.rglob("*.json")) if p.is_dir() else [p]):
            try:
                with open(f) as fh:
                    head = fh.read(200)
            except OSError:
                continue
            if TIMELINE_SCHEMA in head:
                found.append(f)
    return found


# ------------------------------------------------------------------------------------------- CLI
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="results/plot.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", help="run-log JSON files or folders (searched recursively)")
    p.add_argument("--out", default="results/figures", help="folder for the PNGs and summary.csv")
    p.add_argument("--timeline", action="append", default=[], help="a tile-timeline JSON to draw (repeatable)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for given in [*args.paths, *args.timeline]:
        if not Path(given).exists():
            print(f"plot.py: error: {given}: no such file or folder (give run logs, files or folders)", file=sys.stderr)
            return 2
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"plot.py: error: --out: {out} is a file; give a folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    df = load_table(args.paths)
    timelines = list(dict.fromkeys([*map(Path, args.timeline), *find_timelines(args.paths)]))
    if df.empty and not timelines:
        print(f"plot.py: no timed run logs or timelines under {', '.join(args.paths)}", file=sys.stderr)
        return 1
    print(format_table(df))
    written: list[Path] = []
    if not df.empty:
        df.drop(columns=["path"]).to_csv(out / "summary.csv", index=False)
        written += plot_bars(df, out) + plot_sweeps(df, out)
    for t in timelines:
        written.append(plot_gantt(read_timeline(t), out / f"gantt_{_slug(t.stem)}.png"))
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
