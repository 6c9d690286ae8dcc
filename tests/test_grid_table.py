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

from streamk_pgas.results.grid_table import (  # noqa: E402
    FAMILIES,
    PEERS,
    build_table,
    geomean,
    grid_figure,
    main,
    read_sweep,
    summarize,
)

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
    assert "geomean 1.159x over 3 of 4 rows with a ratio, all families pooled** (a row is one cell and one family: " \
           "2 cells x the families reduce, gather); per family: reduce 0.889x (1 of 2 rows), gather 1.323x (2 of 2 " \
           "rows)" in md
    assert "one_shot_fused_B: exit 1" in md
    (png,) = out.glob("grid_*.png")
    assert png.name == "grid_NVIDIA-H200_w2.png"
    assert png.stat().st_size > 10000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_figure_labels_do_not_overlap_on_the_model_grid() -> None:
    from streamk_pgas.results.sweep import GRIDS

    rows = []
    for i, ((m, n, k), dt) in enumerate(GRIDS["model"]):
        for j, fam in enumerate(FAMILIES):
            ratio = math.nan if i == 8 else 0.4 + 0.15 * i + 0.1 * j
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
    assert texts.count("FAIL") == 4 and "0.40" in texts  # values printed on the bars, failures marked
    labels = ax.get_legend_handles_labels()[1]
    assert [label.split(":")[0] for label in labels if "best equal-output peer" in label] == [
        "reduce (all_reduce, one_shot)", "gather (all_scatter)", "ag_gemm (all_gather_gemm)",
        "gemm_rs (gemm_reduce_scatter)"]
    assert len(labels) == 6  # 4 families, fused_all_gather_matmul beside gather (hatched), the 1.0 line


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


def test_families_match_the_sweep_and_every_peer_runs_in_a_grid() -> None:
    from streamk_pgas.reference.config import COLLECTIVES
    from streamk_pgas.results.sweep import FAMILY, REFERENCES_FOR_GRID

    assert set(FAMILY.values()) == set(FAMILIES) == {"reduce", "gather", "ag_gemm", "gemm_rs"}
    assert FAMILY["all_gather_gemm"] == "ag_gemm" and FAMILY["gemm_reduce_scatter"] == "gemm_rs"
    grid_variants = [v for c in REFERENCES_FOR_GRID for v in COLLECTIVES[c]]
    assert sorted(v for f in FAMILIES for v in PEERS[f]) == sorted(grid_variants)  # each variant run once


C = (2048, 4096, 14336)


@pytest.fixture
def new_families_dir(tmp_path: Path) -> Path:
    """Cells A and C with all four families (W=2). fused_all_gather_matmul is faster than all_gather in cell A:
    beside gather it is no peer (all_gather stays the best peer), for ag_gemm it is the best peer."""
    logs = {
        # cell A, gather: all_scatter 0.26 (loop), all_gather 0.36; fused_all_gather_matmul 0.21, not a peer here
        "all_scatter_fused_A": bench("all_scatter", "fused", A, 0.25, loop=0.26),
        "ref_all_gather_A": ref("all_gather", "all_gather", A, 0.35, loop=0.36),
        "ref_fused_all_gather_matmul_A": ref("fused_all_gather_matmul", "all_gather", A, 0.20, loop=0.21),
        # cell A, ag_gemm: ours' best is two_streams 0.19; peers 0.21 (torch fused, best) and 0.25 (NCCL + cuBLAS)
        "all_gather_gemm_fused_A": bench("all_gather_gemm", "fused", A, 0.22, loop=0.23),
        "all_gather_gemm_two_streams_A": bench("all_gather_gemm", "two_streams", A, 0.18, loop=0.19),
        "ref_all_gather_then_gemm_A": ref("all_gather_then_gemm", "all_gather_gemm", A, 0.24, loop=0.25),
        # cell A, gemm_rs: ours 0.31; fused_matmul_reduce_scatter 0.27 is the best peer: a loss (0.27 / 0.31)
        "gemm_reduce_scatter_two_streams_A": bench("gemm_reduce_scatter", "two_streams", A, 0.30, loop=0.31),
        "ref_fused_matmul_reduce_scatter_A": ref("fused_matmul_reduce_scatter", "reduce_scatter", A, 0.28,
                                                 loop=0.27),
        "ref_gemm_then_reduce_scatter_A": ref("gemm_then_reduce_scatter", "gemm_reduce_scatter", A, 0.33, loop=0.34),
        # cell C: torch's fused ops skipped (no symm-mem), the vendor pairs are the only peers; isolated basis
        # for gemm_rs (its peer's log has no loop figure)
        "all_gather_gemm_fused_C": bench("all_gather_gemm", "fused", C, 0.40, loop=0.42),
        "ref_fused_all_gather_matmul_C": ref("fused_all_gather_matmul", "all_gather", C, None,
                                             skipped="torch symm-mem needs a GPU"),
        "ref_all_gather_then_gemm_C": ref("all_gather_then_gemm", "all_gather_gemm", C, 0.50, loop=0.48),
        "gemm_reduce_scatter_fused_C": bench("gemm_reduce_scatter", "fused", C, 0.50, loop=0.52),
        "ref_fused_matmul_reduce_scatter_C": ref("fused_matmul_reduce_scatter", "reduce_scatter", C, None,
                                                 skipped="torch symm-mem needs a GPU"),
        "ref_gemm_then_reduce_scatter_C": ref("gemm_then_reduce_scatter", "gemm_reduce_scatter", C, 0.60),
    }
    for name, rec in logs.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(rec))
    return tmp_path


def test_new_families_compare_with_their_own_equal_output_peers(new_families_dir: Path) -> None:
    t = table_of(new_families_dir)
    assert sorted(zip(t["shape"], t["family"])) == sorted(
        [("4864x4096x8256", f) for f in ("gather", "ag_gemm", "gemm_rs")]
        + [("2048x4096x14336", f) for f in ("ag_gemm", "gemm_rs")])
    gather = row(t, A, "gather")  # the faster fused_all_gather_matmul is shown, never gather's best peer
    assert gather["best_peer"] == "all_gather" and gather["ratio"] == pytest.approx(0.36 / 0.26)
    assert gather["ours_vs_fused_all_gather_matmul"] == pytest.approx(0.21 / 0.26) and gather["peers"] == "all_gather"
    ag = row(t, A, "ag_gemm")
    assert ag["ours_run"] == "all_gather_gemm two_streams g116" and ag["timing"] == "loop"
    assert ag["best_peer"] == "fused_all_gather_matmul" and ag["best_peer_ms"] == pytest.approx(0.21)
    assert ag["ratio"] == pytest.approx(0.21 / 0.19) and ag["flag"] == "ok"
    assert ag["all_gather_then_gemm_ms"] == pytest.approx(0.25) and pd.isna(ag["all_gather_ms"])
    assert ag["peers"] == "fused_all_gather_matmul,all_gather_then_gemm" and "N/W columns" in ag["output"]
    rs = row(t, A, "gemm_rs")
    assert rs["best_peer"] == "fused_matmul_reduce_scatter" and rs["ratio"] == pytest.approx(0.27 / 0.31)
    assert rs["flag"] == "LOSS" and rs["gemm_then_reduce_scatter_ms"] == pytest.approx(0.34)
    assert "M/W rows" in rs["output"]
    ag_c, rs_c = row(t, C, "ag_gemm"), row(t, C, "gemm_rs")  # a skipped torch peer is no failure
    assert ag_c["best_peer"] == "all_gather_then_gemm" and ag_c["ratio"] == pytest.approx(0.48 / 0.42)
    assert ag_c["flag"] == "ok" and ag_c["fused_all_gather_matmul_status"].startswith("skipped")
    assert rs_c["timing"] == "isolated" and rs_c["best_peer"] == "gemm_then_reduce_scatter"
    assert rs_c["ratio"] == pytest.approx(0.60 / 0.50) and rs_c["flag"] == "ok"

    s = summarize(t)
    ratios = [0.36 / 0.26, 0.21 / 0.19, 0.27 / 0.31, 0.48 / 0.42, 0.60 / 0.50]
    assert s["geomean"] == pytest.approx(math.exp(sum(map(math.log, ratios)) / 5))
    assert (s["rows"], s["cells"], s["with_ratio"], s["losses"]) == (5, 2, 5, 1)
    assert s["families"] == ["gather", "ag_gemm", "gemm_rs"]
    assert s["rows_by_family"] == {"gather": 1, "ag_gemm": 2, "gemm_rs": 2}
    assert list(s["geomean_by_family"]) == ["gather", "ag_gemm", "gemm_rs"]  # FAMILIES' order, not the table's
    assert s["geomean_by_family"]["ag_gemm"] == pytest.approx(math.sqrt(0.21 / 0.19 * 0.48 / 0.42))
    assert s["geomean_by_family"]["gemm_rs"] == pytest.approx(math.sqrt(0.27 / 0.31 * 0.60 / 0.50))


def test_new_families_in_markdown_csv_and_figure(new_families_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main([str(new_families_dir), "--out", str(out)]) == 0
    csv = pd.read_csv(out / "grid.csv")
    assert sorted(csv["family"]) == ["ag_gemm", "ag_gemm", "gather", "gemm_rs", "gemm_rs"]
    assert {"fused_matmul_reduce_scatter_ms", "gemm_then_reduce_scatter_ms", "all_gather_then_gemm_ms", "peers",
            "output"} <= set(csv.columns)
    md = (out / "grid.md").read_text()
    head = next(line for line in md.splitlines() if line.startswith("| shape"))
    assert head == ("| shape | dtype | W | family | ours ms (p10-p90) | ours run | all_gather | "
                    "fused_all_gather_matmul | all_gather_then_gemm | fused_matmul_reduce_scatter | "
                    "gemm_then_reduce_scatter | best peer | ratio | flag | timing | first | "
                    "fused_all_gather_matmul † |")
    rows = {line.split(" | ")[3]: line.split(" | ") for line in md.splitlines()
            if line.startswith("| 4864x4096x8256 |")}
    # gather: fused_all_gather_matmul only in its † column; ag_gemm: only in its peer column
    assert rows["gather"][7] == "n/a" and rows["gather"][16].startswith("0.21 (")
    assert rows["ag_gemm"][7].startswith("0.21 (") and rows["ag_gemm"][16] == "n/a |"
    assert rows["ag_gemm"][11:13] == ["fused_all_gather_matmul", "1.105"]
    assert rows["gemm_rs"][11:14] == ["fused_matmul_reduce_scatter", "**0.871**", "**LOSS**"]
    assert "geomean 1.128x over 5 of 5 rows with a ratio, all families pooled** (a row is one cell and one family: " \
           "2 cells x the families gather, ag_gemm, gemm_rs); per family: gather 1.385x (1 of 1 rows), ag_gemm " \
           "1.124x (2 of 2 rows), gemm_rs 1.022x (2 of 2 rows);" in md
    assert "- ag_gemm (`all_gather_gemm`): ends with C[:, the rank's N/W columns] (M x N/W); peers: " \
           "`fused_all_gather_matmul`, `all_gather_then_gemm`" in md
    assert "- † `fused_all_gather_matmul` beside gather is **not a peer** there" in md and "it is ag_gemm's peer" in md
    (png,) = out.glob("grid_*.png")
    assert png.stat().st_size > 10000
