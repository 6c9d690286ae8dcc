"""results/mode_table.py on synthetic run logs: the cells of one call, the best mode, auto's gap, the slow modes
against the planner's notes (the planner stubbed, so the arithmetic is what is checked), and a replay through the
real planner."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from streamk_pgas.results import mode_table
from streamk_pgas.results.mode_table import check_cells, latest_calls, main, measured_modes

SCHEMA = "streamk-pgas/run-log/1"
H100 = "NVIDIA H100 80GB HBM3"


def run_log(mode: str, loop: float, shape: tuple[int, int, int] = (128, 8192, 8192), world: int = 4,
            alg: str = "gemm_reduce_scatter", device: str = H100, passed: bool = True,
            stamp: str = "2026-11-27T10:00:00") -> dict[str, Any]:
    m, n, k = shape
    return {"schema": SCHEMA, "producer": "benchmark", "algorithm": alg, "mode": mode, "world_size": world,
            "flags": {"mode": mode}, "sizes": {"m": m, "n": n, "k": k, "datatype": "bf16"},
            "device": {"name": device}, "timestamp": stamp,
            "timing": {"e2e_ms": loop * 1.1, "loop_ms": loop, "loop": {"median": loop}},
            "validation": {"enabled": True, "passed": passed}}


def write(folder: Path, *logs: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, log in enumerate(logs):
        (folder / f"{i}_{log['mode']}.json").write_text(json.dumps(log))
    return folder


def stub_planner(monkeypatch: pytest.MonkeyPatch, auto: str, warns: set[str]) -> None:
    def planned(*problem: Any, mode: str = "auto") -> dict[str, Any]:
        chosen = auto if mode == "auto" else mode
        return {"mode": chosen, "predicted_ms": 0.1, **({"slow_mode": "slow"} if mode in warns else {})}

    monkeypatch.setattr(mode_table, "planned", planned)


def test_best_gap_slow_and_notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub_planner(monkeypatch, auto="fused", warns={"copy_engine", "two_streams"})
    call = write(tmp_path / "call", run_log("fused", 0.040), run_log("fused_sequential", 0.032),
                 run_log("copy_engine", 0.070), run_log("bulk_sync", 0.045), run_log("two_streams", 0.041),
                 run_log("bulk_sync", 0.01, passed=False))  # not validated: left out
    table, left_out = check_cells(measured_modes([call]), within=0.05)
    assert len(table) == 1 and not any(left_out.values())
    row = table.iloc[0]
    assert row["best"] == "fused_sequential" and row["best_ms"] == pytest.approx(0.032)
    assert row["auto"] == "fused" and row["auto_gap"] == pytest.approx(0.040 / 0.032 - 1) and not row["within"]
    assert row["slow"] == "copy_engine"  # 0.070 > 1.5 x 0.032; bulk_sync's 0.045 is not
    assert row["missed"] == "" and row["false"] == "two_streams"
    assert "bulk_sync=0.045 " in row["modes"] + " "


def test_cells_are_per_call_and_latest_keeps_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub_planner(monkeypatch, auto="fused", warns=set())
    old = write(tmp_path / "old", run_log("fused", 0.030, stamp="2026-11-01T00:00:00"),
                run_log("two_streams", 0.040, stamp="2026-11-01T00:00:00"))
    new = write(tmp_path / "new", run_log("fused", 0.050), run_log("two_streams", 0.040),
                run_log("fused", 0.2, device="Some GPU"), run_log("two_streams", 0.3, device="Some GPU"),
                run_log("fused", 0.2, world=1), run_log("two_streams", 0.3, world=1),
                run_log("fused", 0.2, shape=(64, 64, 64)))
    table, left_out = check_cells(measured_modes([old, new]), within=0.05)
    assert left_out == {"unknown device": 1, "one rank": 1, "one mode": 1}
    assert sorted(table["best"]) == ["fused", "two_streams"]  # each call compared within itself
    latest = latest_calls(table)
    assert len(latest) == 1 and latest.iloc[0]["best"] == "two_streams"
    assert math.isclose(latest.iloc[0]["auto_gap"], 0.25)
    assert main([str(old), str(new), "--latest", "--world", "4", "--out", str(tmp_path / "out")]) == 0
    assert main([str(new), "--world", "2", "--out", str(tmp_path / "out")]) == 1  # no cell of 2 ranks


def test_replays_the_real_planner_and_writes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from streamk_pgas import spec
    from streamk_pgas.overlap.config import OverlapConfig
    from streamk_pgas.overlap.resolution import resolve_config

    auto = resolve_config(OverlapConfig("gemm_reduce_scatter", 128, 8192, 8192, "bf16"), spec.known_target("h100"),
                          4).mode
    other = "bulk_sync" if auto != "bulk_sync" else "fused"
    call = write(tmp_path / "call", run_log(auto, 0.050), run_log(other, 0.040))
    assert main([str(call), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "modes.md").read_text()
    assert "gemm_reduce_scatter: auto within 5% of the best mode on 0 of 1 cells" in md
    assert f"| {other} | 0.04 | {auto} | 25.0% |" in md
    assert (tmp_path / "out" / "modes.csv").exists() and md in capsys.readouterr().out


@pytest.mark.parametrize("argv,flag", [(["--within", "1.5", "x"], "--within"), (["nowhere"], "paths")])
def test_bad_input_is_one_line_exit_2(argv: list[str], flag: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    if argv[-1] == "x":
        argv[-1] = str(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mode_table.py: error: {flag}"), err


# auto within 5% of the best mode measured, per algorithm, on the 4 x H100 cells logged in two modes or more
# (each cell's newest call): what the planner reaches on them now, a floor for any change to its model (python -m
# results.mode_table results/logs/h100x4 --latest replays the same and prints the table)
H100_LOGGED_WITHIN = {"all_gather_gemm": (13, 14), "all_reduce": (18, 18), "gemm_reduce_scatter": (14, 14),
                      "one_shot": (17, 18)}


@pytest.mark.slow
def test_auto_keeps_its_picks_on_the_logged_h100_cells() -> None:
    """The planner replayed on the checked-in 4 x H100 logs (results/logs/h100x4): per algorithm, auto within 5% of
    the best mode measured on at least as many cells as H100_LOGGED_WITHIN, and the same cells logged."""
    logs = Path(__file__).resolve().parent.parent / "results" / "logs" / "h100x4"
    table, _ = check_cells(measured_modes([logs]), 0.05)
    latest = latest_calls(table)
    got = {alg: (int(part["within"].sum()), len(part)) for alg, part in latest.groupby("algorithm")}
    for alg, (within, cells) in H100_LOGGED_WITHIN.items():
        assert got[alg][1] == cells and got[alg][0] >= within, (alg, got[alg], H100_LOGGED_WITHIN[alg])


# The same on 4 x H200: the calls that ran the sequence-parallel pair in every mode (their logs packed in runs.tgz)
H200_CALLS = ("modes-a41f013", "rule-08fc971", "w2pick-6974402")
H200_LOGGED_WITHIN = {"all_gather_gemm": (11, 13), "gemm_reduce_scatter": (11, 12)}


@pytest.mark.slow
def test_auto_keeps_its_picks_on_the_logged_h200_cells(tmp_path: Path) -> None:
    """As above on the 4 x H200 calls of H200_CALLS (W = 2 and 4)."""
    import tarfile

    logs = Path(__file__).resolve().parent.parent / "results" / "logs" / "h200x4"
    for call in H200_CALLS:
        with tarfile.open(logs / call / "runs.tgz") as tar:
            # the data filter where this Python has it (3.10.12+, 3.11.4+)
            tar.extractall(tmp_path / call, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    table, _ = check_cells(measured_modes([tmp_path]), 0.05)
    latest = latest_calls(table)
    got = {alg: (int(part["within"].sum()), len(part)) for alg, part in latest.groupby("algorithm")}
    for alg, (within, cells) in H200_LOGGED_WITHIN.items():
        assert got[alg][1] == cells and got[alg][0] >= within, (alg, got[alg], H200_LOGGED_WITHIN[alg])
