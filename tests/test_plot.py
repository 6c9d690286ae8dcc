"""results/plot.py on logs from a real CPU reference run, plus benchmark-style records and a timeline."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamk_pgas.harness.trace import build_timeline, write_timeline_json

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # results/ is a folder of scripts, not an installed package

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not on PATH")


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plot_logs")
    cmd = ["mpirun", "--oversubscribe", "-np", "2", sys.executable, "-m", "reference", "--collective", "all",
           "-m", "32", "-n", "32", "-k", "32", "--datatype", "fp16", "--iters", "2", "--warmup", "1",
           "--validate", "--output_dir", str(out)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=150, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    # Benchmark-style records derived from the real all_reduce record: 3 algorithms x 2 modes x 2 splits.
    base = json.loads((out / "ref_all_reduce_fp16_32x32x32_w2.json").read_text())
    for alg in ("all_reduce", "one_shot", "all_scatter"):
        for mode in ("fused", "two_streams"):
            for g in (2, 3):
                rec = copy.deepcopy(base)
                rec.update(producer="benchmark", algorithm=alg, mode=mode, implementation="streamk-pgas",
                           flags={"gemm_sms": g, "total_sms": 4})
                rec["timing"]["e2e_ms"] = base["timing"]["e2e_ms"] * g / 4
                (out / f"{alg}_{mode}_g{g}.json").write_text(json.dumps(rec))
    per_rank = []
    for rank in range(2):
        gemm = np.array([[10 * t, 10 * t + 8, t % 2] for t in range(4)], dtype=np.int64)
        comm = np.array([[10 * t + 1, 10 * t + 9, 10 * t + 9, 10 * t + 12, 2] for t in range(4)], dtype=np.int64)
        per_rank.append({"gemm": gemm, "comm": comm, "timer_rate_khz": 1, "rank": rank, "world_size": 2,
                         "algorithm": "all_reduce", "mode": "fused", "gemm_sms": 2, "comm_sms": 1, "num_tiles": 4,
                         "BLK_M": 16, "BLK_N": 16, "device": "cpu"})
    write_timeline_json(build_timeline(per_rank), out / "timelines" / "all_reduce_fused.timeline.json")
    return out


def test_plot_cli_writes_figures_and_table(logdir: Path, tmp_path: Path) -> None:
    figdir = tmp_path / "figs"
    res = subprocess.run([sys.executable, str(ROOT / "results" / "plot.py"), str(logdir), "--out", str(figdir)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    pngs = {p.name.split("_")[0] for p in figdir.glob("*.png")}
    assert pngs == {"bars", "sweep", "gantt"}, sorted(figdir.iterdir())
    for p in figdir.glob("*.png"):
        assert p.stat().st_size > 5000 and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    header = res.stdout.splitlines()[0]
    for col in ("algorithm", "implementation", "mode", "shape", "gemm_sms", "e2e_ms", "tflops", "speedup"):
        assert col in header
    assert (figdir / "summary.csv").stat().st_size > 0


def test_speedups_match_the_vendor_reference(logdir: Path) -> None:
    from streamk_pgas.results.plot import load_table

    df = load_table([logdir])
    assert not df["algorithm"].isin(["reduce_scatter"]).any()  # skipped symm-mem records are dropped
    ref_ar = df[(df["producer"] == "reference") & (df["algorithm"] == "all_reduce")]["e2e_ms"].min()
    ref_ag = df[(df["producer"] == "reference") & (df["algorithm"] == "all_gather")]["e2e_ms"].min()
    bench = df[df["producer"] == "benchmark"]
    for _, row in bench.iterrows():
        ref = ref_ag if row["algorithm"] == "all_scatter" else ref_ar
        assert row["speedup"] == pytest.approx(ref / row["e2e_ms"])
    assert df[df["algorithm"] == "gemm"]["speedup"].isna().all()
    refs = df[df["producer"] == "reference"]  # every reference figure comes with its spread (bars' whiskers)
    assert len(refs) >= 3 and refs["e2e_p10"].notna().all()
    assert ((refs["e2e_p10"] <= refs["e2e_ms"]) & (refs["e2e_ms"] <= refs["e2e_p90"])).all()


def test_runs_that_differ_in_options_get_their_own_bars(logdir: Path, tmp_path: Path) -> None:
    """An A/B pair (here --sk_first) of one algorithm and mode must not collapse into one bar."""
    from streamk_pgas.results.plot import _bar_entries, load_table

    rec = json.loads((logdir / "one_shot_fused_g2.json").read_text())
    rec["flags"] = {**rec["flags"], "sk_first": True, "start_sync": "host", "sk_rounds": 2}
    ab = tmp_path / "ab"
    ab.mkdir()
    (ab / "a.json").write_text((logdir / "one_shot_fused_g2.json").read_text())
    (ab / "b.json").write_text(json.dumps(rec))
    df = load_table([ab])
    assert sorted(df["options"]) == ["", "sk_first, 2 rounds, host sync"]
    labels = [e["label"] for e in _bar_entries(df)]
    assert len(labels) == 2 and labels[1].endswith("sk_first, 2 rounds, host sync")


def test_plot_cli_without_logs_fails(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(ROOT / "results" / "plot.py"), str(tmp_path), "--out",
                          str(tmp_path / "f")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "no timed run logs" in res.stderr


def test_plot_cli_refuses_a_missing_path(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(ROOT / "results" / "plot.py"), str(tmp_path / "missing"), "--out",
                          str(tmp_path / "f")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "missing: no such file or folder" in res.stderr


def test_interpreter_runs_are_marked_and_their_throughput_is_not_drawn(logdir: Path) -> None:
    """The CPU records (ours in the interpreter, the references on torch and gloo): ours are labelled and hatched,
    the title says the times do not compare, ours get no throughput, the references' is in a unit that reads."""
    import matplotlib.pyplot as plt

    from streamk_pgas.results.plot import INTERPRETER_HATCH, bar_figures, load_table, text_overlaps

    ((_, fig),) = list(bar_figures(load_table([logdir])))
    try:
        time_ax, rate_ax = fig.axes[:2]
        labels = [t.get_text() for t in time_ax.get_yticklabels()]
        ours = [i for i, label in enumerate(labels) if not label.startswith("ref ")]
        assert ours and all(labels[i].endswith("[interpreter]") for i in ours)
        assert all(time_ax.patches[i].get_hatch() == INTERPRETER_HATCH for i in ours)
        assert "Triton's interpreter" in fig._suptitle.get_text()
        numbers = [t.get_text() for t in rate_ax.texts]
        assert all(numbers[i] == "n/a" for i in ours) and all("e" not in n for n in numbers)
        assert rate_ax.get_xlabel() != "TFLOP/s per GPU"  # a CPU's references: GFLOP/s or less
        assert text_overlaps(fig) == []
        assert fig.get_figwidth() * 130 <= 2000
    finally:
        plt.close(fig)


def test_checked_in_bar_charts_are_narrow_and_their_text_does_not_overlap() -> None:
    """Every bars_*.png under results/figures is at most 2000 px wide and is one results.redraw_bars draws from its
    logs; drawn again, none has overlapping text."""
    from streamk_pgas.results.redraw_bars import FIGURES, MAX_WIDTH_PX, problems

    figures = ROOT / "results" / "figures"
    charts = sorted(figures.rglob("bars_*.png"))
    assert charts
    for png in charts:
        width = int.from_bytes(png.read_bytes()[16:20], "big")  # the PNG header's width
        assert width <= MAX_WIDTH_PX, f"{png}: {width} px"
        assert str(png.parent.relative_to(figures)) in FIGURES, f"{png}: not in results.redraw_bars.FIGURES"
    assert [p for figure in FIGURES for p in problems(figure, write=False)] == []


def test_text_overlaps_finds_texts_drawn_over_each_other() -> None:
    import matplotlib.pyplot as plt

    from streamk_pgas.results.plot import text_overlaps

    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "all_reduce fused")
    ax.text(0.52, 0.5, "ref torch-symm-mem")
    ax.text(0.1, 0.1, "apart")
    try:
        assert text_overlaps(fig) == [("all_reduce fused", "ref torch-symm-mem")]
    finally:
        plt.close(fig)


def test_a_log_axis_keeps_every_row_apart(tmp_path: Path) -> None:
    """Rates 1000x apart (a log axis) beside interpreter rows with no rate: every row's number and n/a on its own row,
    no text over another."""
    import matplotlib.pyplot as plt

    from streamk_pgas.harness.runlog import SCHEMA
    from streamk_pgas.results.plot import bar_figures, load_table, text_overlaps

    def record(producer: str, algorithm: str, mode: str | None, e2e: float, tflops: float) -> dict:
        return {"schema": SCHEMA, "producer": producer, "algorithm": algorithm, "mode": mode, "world_size": 2,
                "implementation": "streamk-pgas" if producer == "benchmark" else f"torch-{algorithm}",
                "flags": {"gemm_sms": 2, "total_sms": 4} if producer == "benchmark" else {},
                "sizes": {"m": 32, "n": 32, "k": 32, "datatype": "fp32"}, "device": {"name": "cpu", "backend": "cpu"},
                "timing": {"e2e_ms": e2e, "tflops": tflops, "kernels_ms": {}}, "validation": {"passed": True}}

    records = [record("benchmark", alg, mode, 40.0, 1e-6) for alg in ("all_reduce", "one_shot")
               for mode in ("fused", "two_streams", "bulk_sync")]
    records += [record("reference", alg, None, ms, rate) for alg, ms, rate in
                (("all_reduce", 0.3, 1e-7), ("gemm", 0.02, 1e-4), ("all_gather", 0.4, 8e-8))]
    for i, rec in enumerate(records):
        (tmp_path / f"r{i}.json").write_text(json.dumps(rec))
    ((_, fig),) = list(bar_figures(load_table([tmp_path])))
    try:
        assert fig.axes[1].get_xscale() == "log" and fig.axes[0].get_xscale() == "log"
        assert text_overlaps(fig) == []
    finally:
        plt.close(fig)
