"""Per-tile timelines: raw timestamp arrays from every rank -> a timeline JSON and a Chrome trace.

Input, per rank (benchmark.py gathers these from the device):
    gemm  int64 [num_tiles, 3]       (begin, end, pid): the GEMM program `pid` made output tile `row`
    comm  int64 [num_comm_tiles, 5]  (wait_begin, wait_end, begin, end, pid): the communication
                                     program `pid` waited for tile `row` to be ready, then moved it
    timer_rate_khz                   ticks per millisecond (1e6 for %globaltimer / s_memrealtime in ns;
                                     1 for the CPU interpreter's logical clock, which counts events)
    metadata: rank, world_size, algorithm, mode, gemm_sms, comm_sms, num_tiles, BLK_M, BLK_N, device
              (any further keys, e.g. datatype, m, n, k, are kept as they are)
Rows whose end is 0 were not traced and are skipped (a comm row with wait_end 0 keeps its move).

Each GPU has its own %globaltimer, and two GPUs of one host need not agree: on 2 x H200 their
clocks differed by 8 us on one boot and by 200-300 us on another. So when every rank gives an
`origin_ticks` (benchmark.py stamps it as the device-side start barrier releases that rank, within
a few microseconds of the same instant on every rank), each rank's times are made relative to its
own origin; otherwise relative to the earliest timestamp over all ranks (one clock assumed).

`write_chrome_trace` writes the Chrome trace-event format ({"traceEvents": [...]}, "ph": "X"
complete events, "ts"/"dur" in microseconds), which ui.perfetto.dev and chrome://tracing open:
one process per rank ("rank r"), one thread per program and role ("gemm pid 3", "comm pid 130").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

TIMELINE_SCHEMA = "streamk-pgas/tile-timeline/1"
META_KEYS = ("rank", "world_size", "algorithm", "mode", "gemm_sms", "comm_sms", "num_tiles", "BLK_M", "BLK_N",
             "device")
ROLES = ("gemm", "wait", "comm")
# Chrome-trace thread ids: the program id, offset by role so a rank's GEMM and communication
# programs never share a track even when both kernels number their programs from 0.
_TID_OFFSET = {"gemm": 0, "comm": 1_000_000}


def _array(x: Any, cols: int, name: str) -> np.ndarray:
    arr = np.zeros((0, cols), dtype=np.int64) if x is None else np.asarray(x, dtype=np.int64)
    if arr.size == 0:
        return np.zeros((0, cols), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != cols:
        raise ValueError(f"{name} must have shape [rows, {cols}], got {list(arr.shape)}")
    return arr


def _time_unit(rate_khz: float) -> str:
    return "events" if rate_khz == 1 else "us"


def _to_unit(ticks: np.ndarray | int, rate_khz: float) -> np.ndarray | float:
    """Ticks (already relative) -> microseconds; a logical clock (rate 1) stays in events."""
    if rate_khz == 1:
        return np.asarray(ticks, dtype=np.float64)
    return np.asarray(ticks, dtype=np.float64) * (1e3 / rate_khz)


def build_timeline(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    """JSON-able timeline: per rank, events {role, tile, pid, start_us, dur_us} relative to the earliest tick.

    With a logical clock (timer_rate_khz == 1) start_us/dur_us count events, and "time_unit" says so.
    """
    if not per_rank:
        raise ValueError("build_timeline needs at least one rank")
    rates = {float(r.get("timer_rate_khz", 1e6)) for r in per_rank}
    if len(rates) != 1:
        raise ValueError(f"ranks report different timer rates: {sorted(rates)}")
    rate = rates.pop()
    if rate <= 0:
        raise ValueError(f"timer_rate_khz must be > 0, got {rate}")

    origins = [r.get("origin_ticks") for r in per_rank]
    own_origin = all(o is not None for o in origins)
    parsed = []
    starts: list[int] = []
    for r in per_rank:
        gemm = _array(r.get("gemm"), 3, "gemm")
        comm = _array(r.get("comm"), 5, "comm")
        gemm_rows = np.nonzero(gemm[:, 1] != 0)[0]
        comm_rows = np.nonzero(comm[:, 3] != 0)[0]
        wait_rows = comm_rows[comm[comm_rows, 1] != 0]
        parsed.append((r, gemm, comm, gemm_rows, comm_rows, wait_rows))
        for arr, rows, col in ((gemm, gemm_rows, 0), (comm, comm_rows, 2), (comm, wait_rows, 0)):
            if rows.size:
                starts.append(int(arr[rows, col].min()))
    t0 = min(starts) if starts else 0

    ranks = []
    for r, gemm, comm, gemm_rows, comm_rows, wait_rows in parsed:
        origin = int(r["origin_ticks"]) if own_origin else t0
        events: list[dict[str, Any]] = []
        for role, arr, rows, b, e, p in (
            ("gemm", gemm, gemm_rows, 0, 1, 2),
            ("wait", comm, wait_rows, 0, 1, 4),
            ("comm", comm, comm_rows, 2, 3, 4),
        ):
            if not rows.size:
                continue
            begin = arr[rows, b] - origin  # int64 first: float64 cannot hold ns since the epoch exactly
            dur = np.maximum(arr[rows, e] - arr[rows, b], 0)
            for tile, pid, s, d in zip(rows.tolist(), arr[rows, p].tolist(),
                                       _to_unit(begin, rate).tolist(), _to_unit(dur, rate).tolist()):
                events.append({"role": role, "tile": tile, "pid": pid, "start_us": s, "dur_us": d})
        events.sort(key=lambda ev: (ev["start_us"], ROLES.index(ev["role"])))
        meta = {k: _plain(v) for k, v in r.items() if k not in ("gemm", "comm", "origin_ticks")}
        ranks.append({"rank": int(r.get("rank", len(ranks))), "meta": meta, "events": events,
                      "summary": _summary(events)})
    first = per_rank[0]
    meta = {k: _plain(first[k]) for k in first if k not in ("gemm", "comm", "rank", "origin_ticks")}
    return {"schema": TIMELINE_SCHEMA, "time_unit": _time_unit(rate), "timer_rate_khz": rate, "t0_ticks": t0,
            "origin": "each rank's start barrier" if own_origin else "earliest timestamp of any rank",
            "meta": meta, "ranks": sorted(ranks, key=lambda x: x["rank"])}


def _summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Busy time per role (summed over programs), the makespan, and event counts."""
    out: dict[str, Any] = {}
    for role in ROLES:
        evs = [e for e in events if e["role"] == role]
        out[f"{role}_count"] = len(evs)
        out[f"{role}_busy"] = float(sum(e["dur_us"] for e in evs))
    out["makespan"] = float(max((e["start_us"] + e["dur_us"] for e in events), default=0.0))
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v


def write_timeline_json(timeline: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(timeline) + "\n")
    return path


def read_timeline(path: str | Path) -> dict[str, Any]:
    obj = json.loads(Path(path).read_text())
    if not isinstance(obj, dict) or obj.get("schema") != TIMELINE_SCHEMA:
        raise ValueError(f"{path} is not a tile timeline ({TIMELINE_SCHEMA})")
    return obj


def is_timeline_file(path: str | Path) -> bool:
    try:
        read_timeline(path)
    except (OSError, ValueError):
        return False
    return True


def track_label(role: str, pid: int) -> str:
    """The track of a program: waits and moves of one communication program share its track."""
    return f"{'gemm' if role == 'gemm' else 'comm'} pid {pid}"


def chrome_trace(timeline: dict[str, Any]) -> dict[str, Any]:
    """The timeline as Chrome trace events (one process per rank, one thread per program and role)."""
    events: list[dict[str, Any]] = []
    unit = timeline.get("time_unit", "us")
    for r in timeline["ranks"]:
        rank = r["rank"]
        events.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
        tracks: dict[int, str] = {}
        for ev in r["events"]:
            group = "gemm" if ev["role"] == "gemm" else "comm"
            tid = _TID_OFFSET[group] + int(ev["pid"])
            tracks.setdefault(tid, track_label(ev["role"], ev["pid"]))
            name = f"tile {ev['tile']}" if ev["role"] != "wait" else f"wait tile {ev['tile']}"
            events.append({"name": name, "cat": ev["role"], "ph": "X", "pid": rank, "tid": tid,
                           "ts": ev["start_us"], "dur": ev["dur_us"],
                           "args": {"tile": ev["tile"], "role": ev["role"], "program": ev["pid"]}})
        for tid, label in sorted(tracks.items()):
            events.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": label}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": tid,
                           "args": {"sort_index": tid}})
    other = {**timeline.get("meta", {}), "time_unit": unit}
    if unit == "events":
        other["note"] = "logical clock (CPU interpreter): ts and dur count events, not microseconds"
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def write_chrome_trace(timeline: dict[str, Any], path: str | Path) -> Path:
    """Write the Chrome trace-event JSON (opens in ui.perfetto.dev)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(timeline)) + "\n")
    return path


def trace_paths(stem: str | Path) -> tuple[Path, Path]:
    """The two files of a trace: STEM.timeline.json (for plot.py) and STEM.perfetto.json."""
    stem = Path(stem)
    return stem.with_name(stem.name + ".timeline.json"), stem.with_name(stem.name + ".perfetto.json")


def write_traces(per_rank: list[dict[str, Any]], stem: str | Path) -> tuple[Path, Path]:
    """Build the timeline and write both files (trace_paths)."""
    timeline_path, chrome_path = trace_paths(stem)
    timeline = build_timeline(per_rank)
    return write_timeline_json(timeline, timeline_path), write_chrome_trace(timeline, chrome_path)


def main(argv: list[str] | None = None) -> int:
    """python -m harness.trace TIMELINE.json [...]: write the Perfetto trace beside each timeline."""
    import sys

    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m harness.trace TIMELINE.json [...]", file=sys.stderr)
        return 2
    for p in paths:
        src = Path(p)
        out = src.with_name(src.name.replace(".timeline.json", "") + ".perfetto.json")
        print(write_chrome_trace(read_timeline(src), out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
