"""results/grid_table.py on synthetic run logs: best run per family, peers, loop vs isolated, losses, failures,
geomean, the Markdown and CSV, and a figure whose labels do not overlap."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # results/ is a folder of scripts, not an installed package

from results.grid_table import build_table, geomean, grid_figure, main, read_sweep, summarize  # noqa: E402

SCHEMA = "streamk-pgas/run-log/1"


def bench(alg: str, mode: str, shape: tuple[int, int, int], e2e: float, loop: float | None = None,
          passed: bool | None = True, dt: str = "bf16", gemm_sms: int = 116) -> dict[str, Any]:
    m, n, k = shape
    timing: dict[str, Any] = {"iters": 10, "warmup": 1, "e2e_ms": e2e, "e2e_p10_ms": e2e * 0.98,
                              "e2e_p90_ms": e2e * 1.03, "tflops": 1.0, "kernels_ms": {}}
    if loop is not None:
        timing.update(loop_ms=loop, loop={"median": loop, "p10": loop * 0.99, "p90": loop * 1.02, "count": 5})
    return {"schema": SCHEMA, "producer": "benchmark", "algorithm": alg, "implementation": "streamk-pgas",
            "mode": mode, "world_size": 2, "flags": {"mode": mode, "gemm_sms": gemm_sms},
            "sizes": {"m": m, "n": n, "k": k, "datatype": dt}, "device": {"name": "NVIDIA H200"},
            "timing": timing, "validation": {"enabled": passed is not None, "passed": passed}}


def ref(variant: str, alg: str, shape: tuple[int, int, int], e2e: float | None, loop: float | None = None,
        skipped: str | None = None, dt: str = "bf16") -> dict[str, Any]:
    m, n, k = shape
    timing: dict[str, Any] = {"iters": 10, "warmup": 1, "e2e_ms": e2e, "tflops": None, "kernels_ms": {}}
    if e2e is not None:
        timing.update(e2e_p10_ms=e2e * 0.97, e2e_p90_ms=e2e * 1.05)
    if loop is not None:
        timing.update(loop_ms=loop, loop={"median": loop, "p10": loop * 0.95, "p90": loop * 1.1, "count": 5})
    return {"schema": SCHEMA, "producer": "reference", "algorithm": alg, "implementation": "cublas+nccl",
            "mode": None, "world_size": 2, "flags": {"variant": variant}, "variant": variant,
            "sizes": {"m": m, "n": n, "k": k, "datatype": dt}, "device": {"name": "NVIDIA H200"}, "timing": timing,
            "validation": {"enabled": True, "passed": None if skipped else True}, "skipped": skipped, "failed": None}


A = (4864, 4096, 8256)
B = (1000, 3000, 2500)


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    """Cell A: reduce loses (loop basis), gather wins (isolated basis: the all_gather log predates loop timing).
    Cell B: reduce fails (validation failed + a run that crashed), gather wins through an unvalidated-free path."""
    logs = {
        # cell A, reduce: one_shot two_streams is ours' best by loop (0.90); symm_mem_one_shot the best peer (0.80)
        "all_reduce_fused_A": bench("all_reduce", "fused", A, 0.30, loop=1.10),
        "one_shot_two_streams_A": bench("one_shot", "two_streams", A, 0.31, loop=0.90),
        "one_shot_fused_A": bench("one_shot", "fused", A, 0.20, loop=None, passed=None),  # unvalidated: not counted
        "ref_all_reduce_A": ref("all_reduce", "all_reduce", A, 0.40, loop=1.20),
        "ref_symm_mem_one_shot_A": ref("symm_mem_one_shot", "all_reduce", A, 0.45, loop=0.80),
        "ref_symm_mem_two_shot_A": ref("symm_mem_two_shot", "all_reduce", A, None, skipped="needs a GPU"),
        # cell A, gather: all_scatter 0.25 isolated; all_gather 0.35 (no loop field: an old log);
        # fused_all_gather_matmul 0.20 is faster but a different output: never the best peer
        "all_scatter_fused_A": bench("all_scatter", "fused", A, 0.25, loop=0.26),
        "ref_all_gather_A": ref("all_gather", "all_gather", A, 0.35),
        "ref_fused_all_gather_matmul_A": ref("fused_all_gather_matmul", "all_gather", A, 0.20, loop=0.21),
        # cell B, reduce: all_reduce failed validation, one_shot crashed (failures.json, no log)
        "all_reduce_fused_B": bench("all_reduce", "fused", B, 0.50, loop=0.5, passed=False),
        "ref_all_reduce_B": ref("all_reduce", "all_reduce", B, 0.60, loop=0.62),
        # cell B, gather: a win on the loop basis (0.40 / 0.32)
        "all_scatter_fused_B": bench("all_scatter", "fused", B, 0.30, loop=0.32),
        "ref_all_gather_B": ref("all_gather", "all_gather", B, 0.41, loop=0.40),
    }
    for name, rec in logs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(rec))
    plan = {
        "one_shot_fused_B": {"kind": "benchmark", "algorithm": "one_shot", "mode": "fused", "family": "reduce",
                             "cell": {"m": B[0], "n": B[1], "k": B[2], "datatype": "bf16", "world_size": 2,
                                      "index": 1}, "order": 0},
        "ref_symm_mem_all_reduce_B": {"kind": "reference", "collective": "symm_mem_all_reduce",
                                      "variants": ["symm_mem_two_shot", "symm_mem_one_shot"],
                                      "cell": {"m": B[0], "n": B[1], "k": B[2], "datatype": "bf16",
                                               "world_size": 2, "index": 1}, "order": 1},
    }
    (tmp_path / "sweep_plan.json").write_text(json.dumps({"runs": plan}))
    (tmp_path / "failures.json").write_text(json.dumps({"one_shot_fused_B": {
        "returncode": 1, "output_tail": "compiling...\nbenchmark.py: rank 0: ValueError: rows not 16-byte aligned\n"}}))
    return tmp_path


def table_of(path: Path, **kw: Any) -> pd.DataFrame:
    df, planned, failures = read_sweep([path])
    return build_table(df, planned, failures, **kw)


def row(t: pd.DataFrame, shape: tuple[int, int, int], fam: str) -> pd.Series:
    sel = t[(t["shape"] == "x".join(map(str, shape))) & (t["family"] == fam)]
    assert len(sel) == 1, t[["shape", "family"]]
    return sel.iloc[0]


def test_loss_detected_on_loop_timing_with_the_best_of_each_side(sweep_dir: Path) -> None:
    r = row(table_of(sweep_dir), A, "reduce")
    assert r["timing"] == "loop"  # ours and every timed peer have loop figures (the skipped one has no time)
    assert r["ours_run"] == "one_shot two_streams g116" and r["ours_ms"] == pytest.approx(0.90)
    assert (r["ours_p10"], r["ours_p90"]) == (pytest.approx(0.891), pytest.approx(0.918))
    assert r["best_peer"] == "symm_mem_one_shot" and r["best_peer_ms"] == pytest.approx(0.80)
    assert r["ratio"] == pytest.approx(0.80 / 0.90)
    assert r["flag"] == "LOSS"
    assert r["symm_mem_two_shot_status"].startswith("skipped") and math.isnan(r["symm_mem_two_shot_ms"])
    assert r["all_reduce_ms"] == pytest.approx(1.20) and r["all_reduce_p90"] == pytest.approx(1.32)
    assert "one_shot fused: not validated" in r["notes"]  # the faster unvalidated run is shown, not used


def test_isolated_basis_when_a_peer_lacks_loop_timing_and_other_output_is_not_a_peer(sweep_dir: Path) -> None:
    r = row(table_of(sweep_dir), A, "gather")
    assert r["timing"] == "isolated"
    assert r["ours_ms"] == pytest.approx(0.25) and r["all_gather_ms"] == pytest.approx(0.35)
    assert r["best_peer"] == "all_gather" and r["ratio"] == pytest.approx(0.35 / 0.25)
    assert r["flag"] == "ok"
    assert r["fused_all_gather_matmul_ms"] == pytest.approx(0.20)  # shown beside, on the same basis
    assert r["ours_vs_fused_all_gather_matmul"] == pytest.approx(0.20 / 0.25)


def test_failure_row_is_kept_with_its_reasons(sweep_dir: Path) -> None:
    t = table_of(sweep_dir)
    r = row(t, B, "reduce")
    assert r["flag"].startswith("FAIL") and math.isnan(r["ratio"]) and math.isnan(r["ours_ms"])
    assert "all_reduce fused: validation failed" in r["ours_status"]
    assert "one_shot_fused_B: exit 1: benchmark.py: rank 0: ValueError: rows not 16-byte aligned" in r["ours_status"]
    # the planned symm-mem peers never wrote a log: shown as missing, and flagged
    assert r["symm_mem_one_shot_status"].startswith("missing") and "PEER FAIL" in r["flag"]
    assert row(t, B, "gather")["timing"] == "loop" and row(t, B, "gather")["ratio"] == pytest.approx(0.40 / 0.32)
    assert len(t) == 4


def test_geomean_and_summary(sweep_dir: Path) -> None:
    t = table_of(sweep_dir)
    s = summarize(t)
    ratios = [0.80 / 0.90, 0.35 / 0.25, 0.40 / 0.32]
    assert s["geomean"] == pytest.approx(math.exp(sum(map(math.log, ratios)) / 3))
    assert (s["rows"], s["with_ratio"], s["losses"], s["failures"], s["peer_failures"]) == (4, 3, 1, 1, 1)
    assert s["geomean_by_family"]["reduce"] == pytest.approx(0.80 / 0.90)
    assert math.isnan(geomean(pd.Series([math.nan, None])))


def test_allow_unvalidated_counts_runs_without_validation_but_never_failed_ones(sweep_dir: Path) -> None:
    t = table_of(sweep_dir, allow_unvalidated=True)
    r = row(t, A, "reduce")  # one_shot fused counts now, but has no loop figure: ours on loop is still two_streams
    assert r["timing"] == "loop" and r["ours_run"] == "one_shot two_streams g116"
    assert row(t, B, "reduce")["flag"].startswith("FAIL")  # validation failed: still a failure


def test_old_logs_without_newer_fields(tmp_path: Path) -> None:
    old = bench("all_scatter", "fused", A, 0.25)
    del old["timing"]["e2e_p10_ms"], old["timing"]["e2e_p90_ms"]
    ag = ref("all_gather", "all_gather", A, None)
    ag["timing"] = {"e2e_median_ms": 0.30, "kernels_ms": {}}
    (tmp_path / "a.json").write_text(json.dumps(old))
    (tmp_path / "b.json").write_text(json.dumps(ag))
    r = row(table_of(tmp_path), A, "gather")
    assert r["timing"] == "isolated" and r["ratio"] == pytest.approx(0.30 / 0.25) and math.isnan(r["ours_p10"])


def test_cli_writes_csv_markdown_and_figure(sweep_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    assert main([str(sweep_dir), "--out", str(out)]) == 0
    csv = pd.read_csv(out / "grid.csv")
    assert len(csv) == 4 and {"ratio", "flag", "timing", "best_peer", "ours_run", "all_gather_p10"} <= set(csv.columns)
    md = (out / "grid.md").read_text()
    assert "| 4864x4096x8256 | bf16 | 2 | reduce | 0.9 (0.891-0.918) | one_shot two_streams g116 |" in md
    assert "**0.889**" in md and "**LOSS**" in md and "**FAIL" in md
    assert "fused_all_gather_matmul †" in md and "**not a peer**" in md
    assert "geomean 1.159x over 3 of 4 rows" in md
    assert "one_shot_fused_B: exit 1" in md
    (png,) = out.glob("grid_*.png")
    assert png.name == "grid_NVIDIA-H200_w2.png"
    assert png.stat().st_size > 10000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_figure_labels_do_not_overlap_on_the_model_grid() -> None:
    from results.sweep import GRIDS

    rows = []
    for i, ((m, n, k), dt) in enumerate(GRIDS["model"]):
        for fam in ("reduce", "gather"):
            ratio = math.nan if i == 8 else 0.4 + 0.15 * i + (0.1 if fam == "gather" else 0)
            rows.append({"m": m, "n": n, "k": k, "datatype": dt, "family": fam, "ratio": ratio,
                         "flag": "FAIL" if i == 8 else "ok",
                         "ours_vs_fused_all_gather_matmul": 1.1 if fam == "gather" else math.nan})
    fig = grid_figure(pd.DataFrame(rows), "test")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
    assert len(boxes) == 10
    assert all(not a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.x0 >= ax.get_window_extent(renderer).x1  # the legend sits outside the plot
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("FAIL") == 2 and "0.40" in texts  # values printed on the bars, failures marked


def test_a_cell_without_any_log_is_a_failure_row_on_the_sweeps_device(sweep_dir: Path) -> None:
    plan = json.loads((sweep_dir / "sweep_plan.json").read_text())
    cell = {"m": 64, "n": 64, "k": 64, "datatype": "fp16", "world_size": 2, "index": 2}
    plan["runs"]["all_scatter_fused_C"] = {"kind": "benchmark", "algorithm": "all_scatter", "mode": "fused",
                                           "family": "gather", "cell": cell, "order": 5}
    plan["runs"]["ref_all_gather_C"] = {"kind": "reference", "collective": "all_gather", "variants": ["all_gather"],
                                        "cell": cell, "order": 6}
    (sweep_dir / "sweep_plan.json").write_text(json.dumps(plan))
    t = table_of(sweep_dir)
    r = row(t, (64, 64, 64), "gather")
    assert r["flag"] == "FAIL, PEER FAIL, NO PEER" and r["device"] == "NVIDIA H200"
    assert "all_scatter_fused_C: no log (not run yet, or interrupted)" in r["ours_status"]
    assert r["all_gather_status"].startswith("missing") and r["ran_first"] == "ours"
    assert summarize(t)["failures"] == 2


def test_a_mode_the_planner_chose_is_marked_auto(tmp_path: Path) -> None:
    planned = bench("all_scatter", "fused", A, 0.25, loop=0.26)
    planned["flags"]["plan"] = {"planned": ["mode", "gemm_sms"], "source": "model"}
    (tmp_path / "a.json").write_text(json.dumps(planned))
    (tmp_path / "b.json").write_text(json.dumps(ref("all_gather", "all_gather", A, 0.30, loop=0.31)))
    r = row(table_of(tmp_path), A, "gather")
    assert r["ours_run"] == "all_scatter fused (auto) g116" and r["ratio"] == pytest.approx(0.31 / 0.26)
