"""harness/trace.py: timelines from synthetic per-rank arrays, and the Chrome trace-event file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from streamk_pgas.harness.trace import (
    TIMELINE_SCHEMA,
    build_timeline,
    chrome_trace,
    read_timeline,
    write_chrome_trace,
    write_timeline_json,
    write_traces,
)

EPOCH_NS = 1_763_000_000_123_456_789  # a realistic %globaltimer value: float64 alone would lose the ns


def synthetic_rank(rank: int, offset_ns: int = 0, rate_khz: float = 1e6) -> dict:
    tiles = 6
    gemm = np.zeros((tiles, 3), dtype=np.int64)
    comm = np.zeros((tiles, 5), dtype=np.int64)
    base = EPOCH_NS + offset_ns
    for t in range(tiles):
        gemm[t] = (base + 1000 * t, base + 1000 * t + 800, t % 2)
        comm[t] = (base + 1000 * t + 100, base + 1000 * t + 850, base + 1000 * t + 860, base + 1000 * t + 1300,
                   130 + t % 2)
    gemm[5] = 0  # tile 5 was not traced by the GEMM
    comm[4] = 0  # nor was comm tile 4
    comm[3, 0:2] = 0  # comm tile 3 moved without waiting (no wait traced)
    return {"gemm": gemm, "comm": comm, "timer_rate_khz": rate_khz, "rank": rank, "world_size": 2,
            "algorithm": "all_reduce", "mode": "fused", "gemm_sms": 2, "comm_sms": 2, "num_tiles": tiles,
            "BLK_M": 128, "BLK_N": 256, "device": "NVIDIA H200", "datatype": "bf16", "m": 256, "n": 768, "k": 64}


def test_build_timeline_events_relative_and_skips_untraced() -> None:
    tl = build_timeline([synthetic_rank(0, offset_ns=500), synthetic_rank(1)])
    assert tl["schema"] == TIMELINE_SCHEMA
    assert tl["time_unit"] == "us"
    assert tl["t0_ticks"] == EPOCH_NS  # the earliest timestamp over all ranks (rank 1 here)
    r0, r1 = tl["ranks"]
    assert (r0["rank"], r1["rank"]) == (0, 1)
    roles = {role: [e for e in r0["events"] if e["role"] == role] for role in ("gemm", "wait", "comm")}
    assert [e["tile"] for e in sorted(roles["gemm"], key=lambda e: e["tile"])] == [0, 1, 2, 3, 4]
    assert sorted(e["tile"] for e in roles["comm"]) == [0, 1, 2, 3, 5]
    assert sorted(e["tile"] for e in roles["wait"]) == [0, 1, 2, 5]
    g0 = next(e for e in roles["gemm"] if e["tile"] == 0)
    assert g0["start_us"] == pytest.approx(0.5)  # 500 ns after rank 1's first event, exactly
    assert g0["dur_us"] == pytest.approx(0.8)
    assert g0["pid"] == 0
    c1 = next(e for e in roles["comm"] if e["tile"] == 1)
    assert c1["pid"] == 131
    assert c1["start_us"] == pytest.approx(0.5 + 1.86)
    assert c1["dur_us"] == pytest.approx(0.44)
    assert r0["summary"]["gemm_count"] == 5
    assert tl["meta"]["algorithm"] == "all_reduce"


def test_each_rank_on_its_own_origin_when_every_rank_gives_one() -> None:
    """GPU clocks disagree (by 8 us to 300 us on 2 x H200): with origin_ticks (the start barrier's exit on
    that rank's clock) each rank is drawn from its own origin, so a clock offset does not show as skew."""
    far = 250_000_000  # rank 1's clock runs 250 ms ahead of rank 0's
    r0, r1 = synthetic_rank(0), synthetic_rank(1, offset_ns=far)
    r0["origin_ticks"], r1["origin_ticks"] = EPOCH_NS - 2000, EPOCH_NS + far - 2000
    tl = build_timeline([r0, r1])
    assert tl["origin"] == "each rank's start barrier"
    starts = [min(e["start_us"] for e in rank["events"] if e["role"] == "gemm") for rank in tl["ranks"]]
    assert starts == [2.0, 2.0]
    assert "origin_ticks" not in tl["meta"] and "origin_ticks" not in tl["ranks"][0]["meta"]
    # One rank without an origin: one shared axis (the earliest timestamp), as before.
    del r1["origin_ticks"]
    assert build_timeline([r0, r1])["origin"] == "earliest timestamp of any rank"


def test_logical_clock_is_labelled_events() -> None:
    tl = build_timeline([synthetic_rank(0, rate_khz=1)])
    assert tl["time_unit"] == "events"
    g = next(e for e in tl["ranks"][0]["events"] if e["role"] == "gemm" and e["tile"] == 1)
    assert g["start_us"] == 1000 and g["dur_us"] == 800  # raw event counts, not scaled
    assert "events" in chrome_trace(tl)["otherData"]["note"]


def test_bad_shapes_and_rates_are_refused() -> None:
    bad = synthetic_rank(0)
    bad["gemm"] = np.zeros((4, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="gemm"):
        build_timeline([bad])
    with pytest.raises(ValueError, match="timer rates"):
        build_timeline([synthetic_rank(0), synthetic_rank(1, rate_khz=1)])


def test_chrome_trace_file_format(tmp_path) -> None:
    tl = build_timeline([synthetic_rank(0), synthetic_rank(1, offset_ns=250)])
    path = write_chrome_trace(tl, tmp_path / "trace.json")
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert events and {e["ph"] for e in events} == {"X", "M"}
    for e in events:
        for key in ("name", "ph", "pid", "tid"):
            assert key in e
        if e["ph"] == "X":
            assert isinstance(e["ts"], float) and e["dur"] >= 0
            assert "tile" in e["args"] and e["cat"] in ("gemm", "wait", "comm")
        else:
            assert "name" in e["args"] or "sort_index" in e["args"]
    names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "process_name"}
    assert names == {(0, "rank 0"), (1, "rank 1")}
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"gemm pid 0", "gemm pid 1", "comm pid 130", "comm pid 131"} <= threads
    # every X event sits on a named track of its rank
    named = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    assert all((e["pid"], e["tid"]) in named for e in events if e["ph"] == "X")
    # a comm program's waits and moves share its track
    waits = [e for e in events if e["ph"] == "X" and e["cat"] == "wait" and e["pid"] == 0]
    moves = {e["tid"] for e in events if e["ph"] == "X" and e["cat"] == "comm" and e["pid"] == 0}
    assert waits and {e["tid"] for e in waits} <= moves


def test_timeline_json_roundtrip(tmp_path) -> None:
    tl = build_timeline([synthetic_rank(0)])
    path = write_timeline_json(tl, tmp_path / "sub" / "timeline.json")
    assert read_timeline(path) == json.loads(json.dumps(tl))
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(ValueError):
        read_timeline(tmp_path / "other.json")


def test_write_traces_writes_both_files(tmp_path) -> None:
    tl_path, trace_path = write_traces([synthetic_rank(0), synthetic_rank(1)], tmp_path / "run1")
    assert tl_path.name == "run1.timeline.json" and trace_path.name == "run1.perfetto.json"
    assert read_timeline(tl_path)["meta"]["mode"] == "fused"
    assert json.loads(trace_path.read_text())["traceEvents"]
