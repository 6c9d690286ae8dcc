"""tools.comm_bench: the reduce family's communication alone beside the vendor all-reduce, on 2 ranks (the CPU
interpreter and gloo in CI; NCCL and torch symm-mem where GPUs are), and its flag checks."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pytest
from conftest import on_gpu, run_mpi, skip_unless_ranks

from streamk_pgas.tools import comm_bench


def test_sizes_and_shapes() -> None:
    assert [comm_bench.parse_size(x) for x in ("4096", "8KiB", "64MiB", "1GiB")] == [4096, 8192, 64 << 20, 1 << 30]
    for bad in ("0", "1TiB", "x", "-4"):
        with pytest.raises(argparse.ArgumentTypeError):
            comm_bench.parse_size(bad)
    assert comm_bench.c_shape(1 << 20, 2) == (64, 8192)  # 1 MiB of bf16: rows of 8192
    assert comm_bench.c_shape(8192, 4) == (64, 32)  # a small C keeps 64 rows, so it spans several tiles
    assert comm_bench.bus_factor(4) == 1.5 and comm_bench.human(64 << 20) == "64MiB"


def test_runs_validates_and_writes_every_output(tmp_path: Path) -> None:
    """Every implementation gives the all-reduce (ours bit for bit the rank-order sum); the CSV, JSON and PNG
    hold a row per implementation and size with nccl-tests' bus bandwidth."""
    skip_unless_ranks(2)
    sizes = "1MiB" if on_gpu() else "8KiB"
    files = {x: tmp_path / f"cb.{x}" for x in ("csv", "json", "png")}
    outputs = [a for x, f in files.items() for a in (f"--{x}", str(f))]
    result = run_mpi(2, "tools.comm_bench", "--sizes", sizes, *outputs, module=True, timeout=600)
    assert "CHECK FAILED" not in result.stdout, result.stdout
    rows = list(csv.DictReader(files["csv"].open()))
    impls = {(r["implementation"], r["algorithm"]) for r in rows}
    want = {("streamk-pgas", "all_reduce"), ("streamk-pgas", "one_shot"),
            ("nccl" if on_gpu() else "gloo", "all_reduce")}
    assert want <= impls, impls
    for r in rows:
        assert r["validated"] == "True" and float(r["time_us"]) > 0, r
        assert float(r["busbw_gbs"]) == pytest.approx(float(r["algbw_gbs"]) * comm_bench.bus_factor(2))
        if on_gpu() and r["graph_us"]:  # graph replays: the same bytes in the time of a replayed call
            assert float(r["graph_busbw_gbs"]) == pytest.approx(int(r["bytes"]) / float(r["graph_us"]) / 1e3
                                                                 * comm_bench.bus_factor(2))
        else:
            assert r["graph_us"] == "" and r["graph_busbw_gbs"] == "", r  # no graphs on the CPU backend
    if on_gpu():  # ours replays from a graph
        assert all(r["graph_us"] for r in rows if r["implementation"] == "streamk-pgas"), rows
    record = json.loads(files["json"].read_text())
    assert record["world_size"] == 2 and len(record["rows"]) == len(rows)
    assert files["png"].stat().st_size > 10_000


@pytest.mark.parametrize("flag", [["--sizes", "1TiB"], ["--algorithms", "all_scatter"], ["--programs", "0"],
                                  ["--references", "rccl"], ["--iters", "0"], ["--graph", "2"]])
def test_bad_flag_is_one_line_and_exit_2(flag: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before any heap or process group is made (main returns 2 in this process)."""
    assert comm_bench.main(flag) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"comm_bench: error: {flag[0]}"), lines
