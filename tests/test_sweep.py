"""results/sweep.py: planning, --dry_run, bad flags, and resuming with failures recorded (real CPU runs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # results/ is a folder of scripts, not an installed package

from streamk_pgas.reference.config import COLLECTIVES  # noqa: E402
from streamk_pgas.results.sweep import (  # noqa: E402
    ALGORITHMS,
    BENCH_SPLIT,
    GRIDS,
    MODES,
    REFERENCES_FOR_GRID,
    SWEEP_MODES,
    main,
    parse_config,
    plan,
)

needs_mpirun = pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not on PATH")

FAKE_BENCHMARK = r'''
import json, os, sys
args = sys.argv[1:]
if os.environ.get("FAKE_BENCH_FAIL"):
    print("fake benchmark: failing on purpose", file=sys.stderr)
    sys.exit(3)
out = args[args.index("--output_file") + 1]
if os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "0":
    rec = json.load(open(os.environ["FAKE_BENCH_TEMPLATE"]))
    rec.update(producer="benchmark", algorithm=args[args.index("--algorithm") + 1],
               mode=args[args.index("--mode") + 1], implementation="streamk-pgas",
               flags={"gemm_sms": int(args[args.index("--gemm_sms") + 1]) if "--gemm_sms" in args else None})
    json.dump(rec, open(out, "w"))
'''


def sweep_args(logdir: Path, *extra: str) -> list[str]:
    return ["--world_sizes", "2", "--shapes", "32x32x32", "--datatypes", "fp32", "--iters", "2", "--warmup", "1",
            "--logdir", str(logdir), "--figdir", str(logdir / "figs"), "--launcher", "mpirun", *extra]


def test_plan_counts_splits_and_divisibility(tmp_path: Path) -> None:
    cfg = parse_config(sweep_args(tmp_path, "--shapes", "64x64x64,64x63x64", "--algorithms", "all_reduce,all_scatter",
                                  "--modes", "bulk_sync,fused", "--gemm_sms", "2,3", "--references", "all_reduce,all"))
    runs, notes = plan(cfg)
    bench = [r for r in runs if r.kind == "benchmark"]
    refs = [r for r in runs if r.kind == "reference"]
    # 64x64x64: 2 algorithms x (bulk_sync once + fused x 2 splits); 64x63x64: all_scatter (N=63) left out
    assert len(bench) == 2 * 3 + 1 * 3
    assert any("all_scatter" in n and "N is not a multiple of 2" in n for n in notes)
    assert any("reference all" in n for n in notes)  # `all` includes all_gather, which splits N
    assert len(refs) == 2 + 1
    bulk = [r for r in bench if "--mode" in r.command and r.command[r.command.index("--mode") + 1] == "bulk_sync"]
    assert bulk and all("--gemm_sms" not in r.command for r in bulk)
    fused = [r for r in bench if "fused" in r.name]
    assert sorted(r.command[r.command.index("--gemm_sms") + 1] for r in fused)[:2] == ["2", "2"]
    assert len({r.name for r in runs}) == len(runs)  # names are unique: one log per run
    all_ref = next(r for r in refs if "--collective" in r.command and r.command[r.command.index("--collective") + 1]
                   == "all")
    assert len(all_ref.outputs) == len(COLLECTIVES["all"])  # one log per reference variant


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--shapes", "64x64"), ("--algorithms", "all_to_all"), ("--gemm_sms", "0"), ("--datatypes", "fp64"),
     ("--references", "nccl"), ("--iters", "0"), ("--grid", "huge"), ("--modes", "fastest")],
)
def test_bad_flags_exit_2(flag: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(sweep_args(tmp_path, flag, value)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err
    if flag == "--grid":
        assert "model, tiny" in err


def test_grid_plan_cells_peers_validation_and_alternating_order(tmp_path: Path) -> None:
    """--grid model: its 10 cells (one fp16), every equal-output peer planned, validation implied, and
    in each cell the side that runs first alternates (references first in even cells, ours first in odd)."""
    cfg = parse_config(["--grid", "model", "--modes", "auto", "--logdir", str(tmp_path), "--launcher", "mpirun"])
    assert cfg.validate and cfg.modes == ["auto"] and cfg.references == list(REFERENCES_FOR_GRID)
    assert cfg.cells() == GRIDS["model"] and len(cfg.cells()) == 10
    assert ((1000, 3000, 2500), "bf16") in cfg.cells() and ((4864, 4096, 8256), "fp16") in cfg.cells()
    runs, notes = plan(cfg)
    assert notes == []  # every dimension of the grid (M included) splits over 2
    assert len(runs) == 10 * (5 + 5)  # 5 algorithms in mode auto, 5 reference collectives
    cells = [runs[i:i + 10] for i in range(0, len(runs), 10)]
    for index, cell in enumerate(cells):
        assert {r.cell["index"] for r in cell} == {index}
        assert all("--validate" in r.command for r in cell)
        kinds = [r.kind for r in cell]
        assert kinds == (["reference"] * 5 + ["benchmark"] * 5 if index % 2 == 0 else
                         ["benchmark"] * 5 + ["reference"] * 5)
    refs = [r for r in cells[0] if r.kind == "reference"]
    assert [r.command[r.command.index("--collective") + 1] for r in refs] == [
        "all_reduce", "symm_mem_all_reduce", "all_gather", "all_gather_gemm", "gemm_reduce_scatter"]
    assert [v for r in refs for v in r.what["variants"]] == [
        "all_reduce", "symm_mem_two_shot", "symm_mem_one_shot", "all_gather", "fused_all_gather_matmul",
        "all_gather_then_gemm", "fused_matmul_reduce_scatter", "gemm_then_reduce_scatter"]  # each variant once
    bench = [r for r in cells[1] if r.kind == "benchmark"]
    assert [(r.what["algorithm"], r.what["family"]) for r in bench] == [
        ("gemm_reduce_scatter", "gemm_rs"), ("all_gather_gemm", "ag_gemm"), ("one_shot", "reduce"),
        ("all_scatter", "gather"), ("all_reduce", "reduce")]  # odd cell: the list reversed
    assert all(r.command[r.command.index("--mode") + 1] == "auto" for r in bench)
    fp16 = cells[9][0]
    assert "--datatype" in fp16.command and fp16.command[fp16.command.index("--datatype") + 1] == "fp16"
    # --shapes adds cells to a grid; every tiny shape splits over 2 for every algorithm and reference
    cfg = parse_config(["--grid", "tiny", "--shapes", "64x48x32", "--datatypes", "fp16", "--logdir", str(tmp_path)])
    assert cfg.cells() == [*GRIDS["tiny"], ((64, 48, 32), "fp16")]
    assert plan(cfg)[1] == []
    # a grid's modes: auto where benchmark.py lists it under --mode, else every mode
    for help_text, modes in (("  --mode MODE  auto: the planner's choice; fused: one kernel\n  --tma TMA  auto: on",
                              ["auto"]),
                             ("  --mode MODE  bulk_sync: ...; fused: one kernel\n  --tma TMA  (on/off; auto: on)",
                              list(MODES))):
        fake = tmp_path / "fake_help.py"
        fake.write_text(f"print({'usage: benchmark.py [--mode MODE] [--tma TMA]' + chr(10) + help_text!r})")
        cfg = parse_config(["--grid", "tiny", "--benchmark_script", str(fake), "--logdir", str(tmp_path)])
        assert cfg.modes == modes
    # without --grid: the old default (one shape, no validation, two references)
    cfg = parse_config(["--logdir", str(tmp_path)])
    assert cfg.cells() == [((8192, 8192, 8192), "bf16")] and not cfg.validate
    assert cfg.references == ["all_reduce", "all_gather"]


def test_dry_run_prints_commands_and_marks_done_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = sweep_args(tmp_path / "logs", "--algorithms", "one_shot", "--modes", "fused,fused_sequential",
                      "--gemm_sms", "3,5", "--references", "all_reduce", "--validate", "--trace_tiles",
                      "--dry_run")
    runs, _ = plan(parse_config(args))
    done = runs[1]  # pretend one benchmark run finished before
    done.outputs[0].parent.mkdir(parents=True)
    done.outputs[0].write_text(json.dumps({"schema": "streamk-pgas/run-log/1"}))
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(runs) + 3 and lines[-3].startswith("[plot]") and lines[-2].startswith("[table]")
    assert lines[-1].startswith("[modes]") and "results.mode_table" in lines[-1]  # two modes: auto against them
    assert sum(line.startswith("[skip (log exists)]") for line in lines) == 1
    assert sum(line.startswith("[run]") for line in lines) == len(runs) - 1
    bench = [line for line in lines if "benchmark.py" in line]
    assert len(bench) == 3
    for flag in ("--algorithm one_shot", "-m 32 -n 32 -k 32", "--datatype fp32", "--iters 2", "--warmup 1",
                 "--benchmark", "--validate", "--trace_tiles", "--output_file", "-np 2"):
        assert all(flag in line for line in bench), flag
    assert any("--gemm_sms 5" in line for line in bench)
    assert "-m reference --collective all_reduce" in lines[0]
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [done.outputs[0].name]  # nothing else written


@needs_mpirun
def test_resume_records_failures_and_skips_done_runs(tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    fake = tmp_path / "fake_benchmark.py"
    fake.write_text(FAKE_BENCHMARK)
    args = sweep_args(logdir, "--algorithms", "all_reduce", "--modes", "fused", "--gemm_sms", "2",
                      "--references", "all_reduce", "--validate", "--benchmark_script", str(fake))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "FAKE_BENCH_FAIL": "1"}

    def sweep(*extra: str, **env_extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "results.sweep", *args, *extra], capture_output=True, text=True,
                              timeout=240, cwd=ROOT, env={**env, **env_extra})

    # 1st: the reference runs for real, the benchmark fails: recorded, the sweep goes on and plots.
    first = sweep()
    assert first.returncode == 1, first.stderr
    ref_log = logdir / "ref_all_reduce_fp32_32x32x32_w2.json"
    assert json.loads(ref_log.read_text())["validation"]["passed"]
    failures = json.loads((logdir / "failures.json").read_text())
    (name,) = failures
    assert name.startswith("all_reduce_fused_fp32_32x32x32_w2_g2") and failures[name]["returncode"] != 0
    assert "failing on purpose" in failures[name]["output_tail"]
    assert (logdir / "output" / f"{name}.log").exists()
    assert list((logdir / "figs").glob("bars_*.png"))
    mtime = ref_log.stat().st_mtime_ns

    # 2nd, --skip_failed: nothing to do.
    second = sweep("--skip_failed", "--no_plot")
    assert second.returncode == 0 and "0 ran, 2 skipped" in second.stderr

    # 3rd: the benchmark now works; the reference is not run again, and the failure is cleared.
    third = sweep("--no_plot", FAKE_BENCH_FAIL="", FAKE_BENCH_TEMPLATE=str(ref_log))
    assert third.returncode == 0, third.stderr
    assert "1 ran, 1 skipped" in third.stderr
    assert ref_log.stat().st_mtime_ns == mtime
    assert json.loads((logdir / "failures.json").read_text()) == {}
    assert json.loads((logdir / f"{name}.json").read_text())["producer"] == "benchmark"


@needs_mpirun
@pytest.mark.slow
def test_tiny_grid_end_to_end_with_table_and_figure(tmp_path: Path) -> None:
    """`--grid tiny` for real on the CPU (2 ranks, Triton's interpreter): benchmark.py and the references run,
    the progress lines count down, the order alternates, and grid.csv / grid.md / grid_*.png hold every cell and
    family. The unaligned cell (24x36x44) either validates or is a FAIL row with benchmark.py's own reason. (A peer
    that cannot run here, torch's fused ops, is a skipped record: test_reference.py runs it, test_grid_table.py
    tables it.)"""
    import pandas as pd

    logdir, figdir = tmp_path / "logs", tmp_path / "figs"
    args = ["--grid", "tiny", "--modes", "fused", "--algorithms", "all_reduce,all_scatter",
            "--references", "all_reduce,all_gather", "--iters", "2", "--warmup", "1",
            "--logdir", str(logdir), "--figdir", str(figdir), "--launcher", "mpirun", "--run_timeout_s", "240"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRITON_INTERPRET": "1"}
    res = subprocess.run([sys.executable, "-m", "results.sweep", *args], capture_output=True, text=True,
                         timeout=600, cwd=ROOT, env=env)
    failures = json.loads((logdir / "failures.json").read_text()) if (logdir / "failures.json").exists() else {}
    assert res.returncode == (1 if failures else 0), res.stderr[-3000:]
    assert all(name.startswith(("all_reduce_fused_fp32_24x36x44", "all_scatter_fused_fp32_24x36x44"))
               for name in failures), failures  # only the unaligned cell may fail (until its layout lands)
    ends = [line for line in res.stderr.splitlines()
            if line.startswith("[") and (": ok (" in line or ": FAILED (" in line)]
    assert len(ends) == 8 and ends[0].startswith("[1/8] ref_all_reduce_fp32_32x64x64_w2: ok")
    assert all("elapsed" in line and "ETA" in line for line in ends) and "ETA 0:00" in ends[-1]
    # cell 0: references first; cell 1: ours first (the whole list reversed)
    assert ends[4].startswith("[5/8] all_scatter_fused_fp32_24x36x44") and ends[-1].startswith(
        "[8/8] ref_all_reduce_fp32_24x36x44_w2")
    assert len(json.loads((logdir / "sweep_plan.json").read_text())["runs"]) == 8

    table = pd.read_csv(figdir / "grid.csv")
    assert sorted(zip(table["shape"], table["family"])) == [
        ("24x36x44", "gather"), ("24x36x44", "reduce"), ("32x64x64", "gather"), ("32x64x64", "reduce")]
    for _, r in table.iterrows():
        assert r["all_reduce_ms" if r["family"] == "reduce" else "all_gather_ms"] > 0  # the peer ran, validated
        assert r["best_peer"] == ("all_reduce" if r["family"] == "reduce" else "all_gather")
        assert r["ran_first"] == ("peers" if r["shape"] == "32x64x64" else "ours")
        if r["shape"] == "32x64x64" or not r["flag"].startswith("FAIL"):
            assert r["ours_status"] == "ok" and r["ours_ms"] > 0 and r["timing"] == "loop"
            assert r["ratio"] == pytest.approx(r["best_peer_ms"] / r["ours_ms"])
            assert r["ours_run"] == f"{'all_reduce' if r['family'] == 'reduce' else 'all_scatter'} fused g2"
        else:
            assert pd.isna(r["ratio"]) and "benchmark.py: rank" in r["ours_status"]
    md = (figdir / "grid.md").read_text()
    assert "| 32x64x64 | fp32 | 2 | reduce |" in md and "geomean" in md
    (png,) = figdir.glob("grid_*_w2.png")
    assert png.stat().st_size > 10000

    # resume: everything is done or failed before; nothing runs
    again = subprocess.run([sys.executable, "-m", "results.sweep", *args, "--skip_failed", "--no_plot"],
                           capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert again.returncode == 0 and "0 ran, 8 skipped" in again.stderr


def test_new_algorithms_and_their_peers_in_a_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The default algorithms include all_gather_gemm and gemm_reduce_scatter; --grid's references run their
    equal-output peers (the collectives all_gather_gemm and gemm_reduce_scatter, two variants each)."""
    assert ALGORITHMS == ("all_reduce", "all_scatter", "one_shot", "all_gather_gemm", "gemm_reduce_scatter")
    args = ["--grid", "tiny", "--modes", "fused", "--logdir", str(tmp_path / "logs"), "--launcher", "mpirun",
            "--dry_run"]
    assert parse_config(args).algorithms == list(ALGORITHMS)
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    bench = [line for line in lines if "benchmark.py" in line]
    refs = [line for line in lines if "-m reference" in line]
    assert len(bench) == 2 * 5 and len(refs) == 2 * 5 and len(lines) == 20 + 2
    for alg in ALGORITHMS:
        cmds = [line for line in bench if f"--algorithm {alg} " in line]
        assert len(cmds) == 2 and all("--mode fused" in line and "--validate" in line for line in cmds), alg
    assert any("--algorithm all_gather_gemm --mode fused -m 24 -n 36 -k 44" in line for line in bench)
    for coll in ("all_gather_gemm", "gemm_reduce_scatter"):
        cmds = [line for line in refs if f"--collective {coll} " in line]
        assert len(cmds) == 2 and all("--validate" in line for line in cmds)
    assert not any("--collective fused_all_gather_matmul" in line for line in refs)  # all_gather_gemm runs it
    assert not (tmp_path / "logs").exists()  # a dry run writes nothing


def algorithms_by_shape(runs: list) -> dict[tuple[int, int, int], list[str]]:
    """(M, N, K) -> the benchmark algorithms planned for that cell, sorted (every cell of the plan listed)."""
    out: dict[tuple[int, int, int], list[str]] = {}
    for r in runs:
        algs = out.setdefault((r.cell["m"], r.cell["n"], r.cell["k"]), [])
        if r.kind == "benchmark":
            algs.append(r.what["algorithm"])
    return {shape: sorted(algs) for shape, algs in out.items()}


def test_m_not_a_multiple_of_the_world_skips_the_algorithms_that_split_m(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    args = sweep_args(tmp_path, "--shapes", "63x64x64,64x62x64,64x64x66", "--modes", "fused",
                      "--references", ",".join(REFERENCES_FOR_GRID))
    runs, notes = plan(parse_config(args))
    algs = algorithms_by_shape(runs)
    # M = 63: everything but all_gather_gemm and gemm_reduce_scatter (which split M) runs
    assert algs[(63, 64, 64)] == ["all_reduce", "all_scatter", "one_shot"]
    assert "all_gather_gemm (63, 64, 64) W=2: M is not a multiple of 2" in notes
    assert "gemm_reduce_scatter (63, 64, 64) W=2: M is not a multiple of 2" in notes
    assert "reference all_gather_gemm (63, 64, 64) W=2: M is not a multiple of 2" in notes
    assert "reference gemm_reduce_scatter (63, 64, 64) W=2: M is not a multiple of 2" in notes
    # N = 62 is even: all run. K = 66 is even too: all run (W=2)
    assert algs[(64, 62, 64)] == algs[(64, 64, 66)] == sorted(ALGORITHMS)
    refs63 = [r.what["collective"] for r in runs if r.kind == "reference" and r.cell["m"] == 63]
    assert refs63 == ["all_reduce", "symm_mem_all_reduce", "all_gather"]
    assert len(notes) == 4
    # W=4: N = 62 and K = 66 are not multiples of 4, M = 64 is
    runs4, notes4 = plan(parse_config([*args, "--world_sizes", "4"]))
    assert "all_gather_gemm (64, 62, 64) W=4: N is not a multiple of 4" in notes4
    assert "gemm_reduce_scatter (64, 64, 66) W=4: K is not a multiple of 4" in notes4
    algs4 = algorithms_by_shape(runs4)
    assert algs4[(64, 62, 64)] == ["all_reduce", "gemm_reduce_scatter", "one_shot"]
    assert algs4[(64, 64, 66)] == ["all_gather_gemm", "all_scatter"]
    assert algs4[(63, 64, 64)] == ["all_reduce", "all_scatter", "one_shot"]  # only M = 63 does not split
    # the sweep says what it left out (stderr), then prints the runs
    assert main([*args, "--dry_run", "--no_plot"]) == 0
    err = capsys.readouterr().err
    assert "sweep: left out all_gather_gemm (63, 64, 64) W=2: M is not a multiple of 2" in err


def test_a_reference_whose_variants_already_run_in_the_cell_is_left_out(tmp_path: Path) -> None:
    runs, notes = plan(parse_config(sweep_args(tmp_path, "--algorithms", "none", "--references",
                                               "all_gather_gemm,fused_all_gather_matmul,all_gather")))
    assert [r.what["collective"] for r in runs] == ["all_gather_gemm", "all_gather"]
    assert notes == ["reference fused_all_gather_matmul (32, 32, 32) W=2: its variants already run in this cell"]


def test_split_dims_algorithms_and_modes_come_from_the_spec(tmp_path: Path) -> None:
    """The sweep reads the algorithms, their splits and the modes from spec (torch-free), as benchmark.py's
    checks do; --modes takes every mode of spec.MODES."""
    from streamk_pgas import spec

    assert set(ALGORITHMS) == set(spec.ALGORITHMS) == set(BENCH_SPLIT)
    assert BENCH_SPLIT["all_gather_gemm"] == ("m", "n") and BENCH_SPLIT["gemm_reduce_scatter"] == ("m", "k")
    assert MODES == tuple(spec.MODES) and SWEEP_MODES == (*spec.MODES, "auto")
    rc = main(["--modes", "copy_engine", "--algorithms", "none", "--references", "none", "--logdir", str(tmp_path),
               "--dry_run", "--no_plot"])
    assert rc == 0
    code = ("import sys, streamk_pgas.results.sweep; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]", out  # the sweep's flag checks and --dry_run load neither torch nor Triton


def test_copy_engine_runs_only_where_it_is_built(tmp_path: Path) -> None:
    """--modes copy_engine plans all_scatter, all_gather_gemm and gemm_reduce_scatter (no --gemm_sms split: the
    GEMM keeps every SM), and notes the algorithms it leaves out."""
    cfg = parse_config(["--shapes", "64x64x64", "--datatypes", "fp32", "--modes", "copy_engine,fused",
                        "--gemm_sms", "2,3", "--logdir", str(tmp_path)])
    runs, notes = plan(cfg)
    ce = sorted(r.what["algorithm"] for r in runs if r.what.get("mode") == "copy_engine")
    assert ce == ["all_gather_gemm", "all_scatter", "gemm_reduce_scatter"]
    assert all(r.what["gemm_sms"] is None for r in runs if r.what.get("mode") == "copy_engine")
    assert len([r for r in runs if r.what.get("mode") == "fused"]) == 2 * 5  # every algorithm, both splits
    assert any("all_reduce" in n and "copy_engine is not built" in n for n in notes)
    assert any("one_shot" in n and "copy_engine is not built" in n for n in notes)


def test_grid_references_cover_every_familys_peers() -> None:
    """REFERENCES_FOR_GRID (the reference launches of a grid cell) runs every equal-output peer of every family of
    our algorithms (spec.baselines), and nothing else."""
    from streamk_pgas import spec

    variants = {v for coll in REFERENCES_FOR_GRID for v in COLLECTIVES[coll]}
    peers = {p for alg in spec.ALGORITHMS.values() for p in spec.peers(alg.family.name)}
    assert variants == peers
