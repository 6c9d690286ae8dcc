"""Sweep driver: shapes x datatypes x world sizes x algorithms x modes x SM splits, plus the references.

    python -m results.sweep --world_sizes 2 --shapes 8192x8192x8192,4864x4096x8256 \\
        --gemm_sms 100,108,116,124 --references all_reduce,all_gather,symm_mem_all_reduce \\
        --validate --logdir results/logs/sweep --figdir results/figures
    python -m results.sweep --grid model --logdir results/logs/h200x2/grid-COMMIT \\
        --figdir results/figures/h200x2/grid-COMMIT

`--grid NAME` runs a named list of (shape, datatype) cells (GRIDS: `model` the transformer-layer grid, `tiny` a
CPU-sized one for CI), validated, beside every equal-output peer of every family (REFERENCES_FOR_GRID); `--shapes`
adds cells of its own (each with every --datatypes). Within a cell the runs of ours and of the
references take turns going first: even cells run the references first, odd cells run the whole
cell's list reversed (ours first), so no side always starts on a cold or a warm machine.
Each run is its own `mpirun -np W python benchmark.py ... --output_file LOGDIR/NAME.json` (or
`python -m reference ... --output_dir LOGDIR`) subprocess; its output goes to LOGDIR/output/NAME.log.
Resumable: a run whose log(s) already exist is skipped. A failed run is recorded in
LOGDIR/failures.json and the sweep goes on (it is retried next time unless --skip_failed).
LOGDIR/sweep_plan.json lists every planned run with its cell and family (merged over resumed sweeps),
so results/grid_table.py can show a run that never wrote a log as a failure.
Progress: one line as a run starts and one as it ends: index / runs to do, name, seconds, elapsed, ETA.
At the end results/plot.py draws every figure from LOGDIR and results/grid_table.py writes grid.csv,
grid.md and grid_*.png (ours vs the best equal-output peer) into FIGDIR, so one command regenerates them.
--dry_run prints the commands (and which would be skipped) without running anything.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamk_pgas import spec
from streamk_pgas.harness.checks import ConfigError, OneLineParser
from streamk_pgas.reference.config import COLLECTIVES, SPLIT_DIMS, default_log_name
from streamk_pgas.spec import DATATYPES

ROOT = Path(__file__).resolve().parent.parent
ALGORITHMS = tuple(spec.ALGORITHMS)
# Every mode benchmark.py takes (a mode spec.MODES gains joins the sweep without an edit here).
MODES = tuple(spec.MODES)
# `auto`: the planner's choice (benchmark.py `--mode auto`). Not in the default list without --grid: a sweep of
# modes measures each; a grid asks benchmark.py whether it takes auto (benchmark_takes_auto).
SWEEP_MODES = (*MODES, spec.AUTO)
# Family of an algorithm (spec.sharding): the runs of one family end with the same output and are compared with
# the same (equal-output) peers; the table keeps the best validated run of each family.
FAMILY = {name: alg.family.name for name, alg in spec.ALGORITHMS.items()}
# Modes that run every program as both GEMM and communication: --gemm_sms means nothing to them.
NO_SPLIT_MODES = tuple(m.name for m in spec.MODES.values() if not m.splits_sms and not m.gemm_on_every_sm)

Cell = tuple[tuple[int, int, int], str]  # (M, N, K), datatype

# Named grids: (M, N, K) and datatype. `model`: shapes of transformer layers, plus the two the
# defaults were tuned on, an unaligned one and an fp16 one. `tiny`: small enough for the CPU interpreter
# (fp32: the interpreter has no bf16 atomic_add and loses fp16 atomic updates between ranks); every
# dimension is even, so each split is legal over 2 ranks; 24x36x44 leaves K/2 = 22 and N/2 = 18 fp32
# elements per row, rows that are not 16-byte aligned.
GRIDS: dict[str, list[Cell]] = {
    "model": [
        ((512, 8192, 8192), "bf16"), ((1024, 8192, 8192), "bf16"), ((2048, 4096, 14336), "bf16"),
        ((4096, 8192, 28672), "bf16"), ((4096, 57344, 8192), "bf16"), ((16384, 8192, 8192), "bf16"),
        ((4864, 4096, 8256), "bf16"), ((8192, 8192, 8192), "bf16"), ((1000, 3000, 2500), "bf16"),
        ((4864, 4096, 8256), "fp16"),
    ],
    "tiny": [((32, 64, 64), "fp32"), ((24, 36, 44), "fp32")],
}
# The reference collectives a grid runs by default: every family's equal-output peers. reduce and gather (the
# whole C on every rank): cuBLAS + NCCL all_reduce, cuBLAS + torch symm-mem one-shot / two-shot, cuBLAS + NCCL
# all_gather. ag_gemm: the collective all_gather_gemm = torch's fused_all_gather_matmul and NCCL all_gather of A
# + cuBLAS (fused_all_gather_matmul is also shown beside the gather family, there as a different output).
# gemm_rs: the collective gemm_reduce_scatter = torch's fused_matmul_reduce_scatter and cuBLAS + NCCL
# reduce_scatter.
REFERENCES_FOR_GRID = ("all_reduce", "symm_mem_all_reduce", "all_gather", "all_gather_gemm", "gemm_reduce_scatter")
# Benchmark algorithm -> the dimensions it splits over the world (each must be a multiple of the world size).
BENCH_SPLIT: dict[str, tuple[str, ...]] = {name: alg.family.split_dims() for name, alg in spec.ALGORITHMS.items()}


class SweepError(ValueError):
    """A bad flag: one line naming it."""


@dataclass
class SweepConfig:
    world_sizes: list[int] = field(default_factory=lambda: [2])
    shapes: list[tuple[int, int, int]] = field(default_factory=lambda: [(8192, 8192, 8192)])
    datatypes: list[str] = field(default_factory=lambda: ["bf16"])
    grid: str | None = None  # a GRIDS name: its cells come first, then shapes x datatypes
    algorithms: list[str] = field(default_factory=lambda: list(ALGORITHMS))
    modes: list[str] = field(default_factory=lambda: list(MODES))
    gemm_sms: list[int | None] = field(default_factory=lambda: [None])  # None: benchmark.py's default split
    no_split_modes: list[str] = field(default_factory=lambda: list(NO_SPLIT_MODES))
    total_sms: int | None = None
    blocks: list[tuple[int, int, int] | None] = field(default_factory=lambda: [None])
    iters: int = 50
    warmup: int = 10
    validate: bool = False
    trace_tiles: bool = False
    references: list[str] = field(default_factory=lambda: ["all_reduce", "all_gather"])
    logdir: Path = Path("results/logs/sweep")
    figdir: Path = Path("results/figures")
    launcher: str = "auto"
    python: str = sys.executable
    benchmark_script: Path = ROOT / "benchmark.py"
    bench_args: list[str] = field(default_factory=list)
    ref_args: list[str] = field(default_factory=list)
    run_timeout_s: float = 1800.0
    dry_run: bool = False
    plot: bool = True
    skip_failed: bool = False

    def cells(self) -> list[Cell]:
        """The (shape, datatype) cells in order: the grid's, then shapes x datatypes; duplicates once."""
        cells = list(GRIDS[self.grid]) if self.grid else []
        cells += [(s, dt) for s in self.shapes for dt in self.datatypes]
        return list(dict.fromkeys(cells))


@dataclass
class Run:
    """One subprocess of the sweep, and the log file(s) that mean it is done."""

    name: str
    kind: str  # "benchmark" or "reference"
    command: list[str]
    outputs: list[Path]
    cell: dict[str, Any] = field(default_factory=dict)  # m, n, k, datatype, world_size, index (for the plan file)
    what: dict[str, Any] = field(default_factory=dict)  # algorithm/mode/family or collective/variants

    def done(self) -> bool:
        """Every log exists and parses (a run killed while writing does not count)."""
        for p in self.outputs:
            try:
                if "schema" not in json.loads(p.read_text()):
                    return False
            except (OSError, ValueError):
                return False
        return True


# ------------------------------------------------------------------------------------ parsing
def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _values(flag: str, text: str, parse: Callable[[str], Any], allow_default: bool) -> list[Any]:
    """parse() of each comma-separated value (None for "default" where allowed); SweepError if there is none."""
    out = [None if allow_default and t == "default" else parse(t) for t in _split(text)]
    if not out:
        raise SweepError(f"{flag}: give at least one value")
    return out


def _ints(flag: str, text: str, allow_default: bool = False) -> list[Any]:
    def parse(t: str) -> int:
        if not t.isdigit() or int(t) < 1:
            raise SweepError(f"{flag}: expected positive integers separated by commas, got {t!r}")
        return int(t)

    return _values(flag, text, parse, allow_default)


def _triples(flag: str, text: str, allow_default: bool = False) -> list[Any]:
    def parse(t: str) -> tuple[int, ...]:
        parts = t.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SweepError(f"{flag}: expected AxBxC with positive integers (e.g. 8192x8192x8192), got {t!r}")
        return tuple(int(p) for p in parts)

    return _values(flag, text, parse, allow_default)


def _choices(flag: str, text: str, valid: Iterable[str], allow_none: bool = False) -> list[str]:
    valid = tuple(valid)
    values = _split(text)
    if allow_none and values in (["none"], []):
        return []
    bad = [v for v in values if v not in valid]
    if bad or not values:
        raise SweepError(f"{flag}: must be a comma-separated list of {', '.join(valid)}"
                         + (" (or none)" if allow_none else "") + f"; got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m results.sweep", description=__doc__.split("\n\n")[0],
                      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    a = p.add_argument
    a("--world_sizes", default="2", help="ranks (GPUs) per run, comma-separated")
    a("--grid", default=None, help=f"a named grid of (shape, datatype) cells, one of {', '.join(GRIDS)}: "
      + "; ".join(f"{name}: " + ", ".join(f"{m}x{n}x{k} {dt}" for (m, n, k), dt in cells)
                  for name, cells in GRIDS.items())
      + f". Implies --validate; references default to {','.join(REFERENCES_FOR_GRID)}")
    a("--shapes", default=None,
      help="MxNxK problem sizes, comma-separated, each run with every --datatypes (default: 8192x8192x8192 "
      "without --grid; with --grid, extra cells)")
    a("--datatypes", default="bf16", help=f"comma-separated, of {', '.join(DATATYPES)} (for --shapes)")
    a("--algorithms", default=",".join(ALGORITHMS), help="benchmark.py algorithms (or none)")
    a("--modes", default=None,
      help=f"benchmark.py modes, of {', '.join(SWEEP_MODES)} (auto: the planner's choice, benchmark.py --mode auto). "
      f"Default: {','.join(MODES)}; with --grid, auto if benchmark.py takes it (asked once through --help), else "
      "every mode. The table keeps the best validated run per family either way")
    a("--gemm_sms", default="default", help="--gemm_sms values to sweep ('default': benchmark.py's own split)")
    a("--no_split_modes", default=",".join(NO_SPLIT_MODES),
      help="modes that ignore --gemm_sms (all SMs do each phase): run once with the default split (or none)")
    a("--total_sms", type=int, default=None, help="--total_sms for every run (default: the device's SMs)")
    a("--blocks", default="default", help="BLK_MxBLK_NxBLK_K values ('default': benchmark.py's)")
    a("--iters", type=int, default=50, help="timed iterations per run")
    a("--warmup", type=int, default=10, help="warm-up iterations per run")
    a("--validate", action="store_true", help="validate every run")
    a("--trace_tiles", action="store_true", help="pass --trace_tiles to benchmark.py")
    a("--references", default=None,
      help=f"reference collectives (python -m reference), comma-separated, of {', '.join(COLLECTIVES)} (or none); "
      f"default all_reduce,all_gather, with --grid {','.join(REFERENCES_FOR_GRID)}")
    a("--logdir", default="results/logs/sweep", help="one JSON log per run; failures.json; output/*.log")
    a("--figdir", default="results/figures", help="where results/plot.py puts the figures")
    a("--launcher", default="auto", choices=("auto", "mpirun", "torchrun"), help="auto: mpirun if on PATH")
    a("--python", default=sys.executable, help="interpreter for the runs")
    a("--benchmark_script", default=str(ROOT / "benchmark.py"), help="benchmark.py to run")
    a("--bench_args", default="", help="extra flags for every benchmark.py run (one shell-quoted string)")
    a("--ref_args", default="", help="extra flags for every reference run (one shell-quoted string)")
    a("--run_timeout_s", type=float, default=1800.0, help="a run taking longer is killed and recorded as failed")
    a("--dry_run", action="store_true", help="print the commands, run nothing")
    a("--no_plot", action="store_true", help="do not call results/plot.py and results/grid_table.py at the end")
    a("--skip_failed", action="store_true", help="do not retry runs listed in failures.json")
    return p


def benchmark_takes_auto(python: str, script: str | Path) -> bool:
    """Whether `script --help` lists `auto` under --mode (the planner's choice; a benchmark.py of another
    checkout may not take it). One plain-Python call, a few seconds; False if it cannot be asked."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        out = subprocess.run([python, str(script), "--help"], capture_output=True, text=True, timeout=180,
                             env=env).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    section = re.search(r"\n  --mode MODE(.*?)(?=\n  -|\Z)", out, re.S)
    return bool(section and re.search(r"\bauto:", section.group(1)))


def _default_modes(ns: argparse.Namespace) -> list[str]:
    if not ns.grid:
        return list(MODES)
    if benchmark_takes_auto(ns.python, ns.benchmark_script):
        print("sweep: --modes auto (the planner's choice; give --modes to sweep modes yourself)", file=sys.stderr)
        return ["auto"]
    print(f"sweep: {ns.benchmark_script} does not take --mode auto: running every mode ({','.join(MODES)}); the "
          "table keeps the best validated run per family", file=sys.stderr)
    return list(MODES)


def parse_config(argv: list[str] | None) -> SweepConfig:
    ns = build_parser().parse_args(argv)
    for flag, v in (("--iters", ns.iters), ("--run_timeout_s", ns.run_timeout_s)):
        if v <= 0:
            raise SweepError(f"{flag}: must be > 0, got {v}")
    if ns.warmup < 0:
        raise SweepError(f"--warmup: must be >= 0, got {ns.warmup}")
    if ns.total_sms is not None and ns.total_sms < 1:
        raise SweepError(f"--total_sms: must be >= 1, got {ns.total_sms}")
    if ns.grid is not None and ns.grid not in GRIDS:
        raise SweepError(f"--grid: must be one of {', '.join(GRIDS)}; got {ns.grid!r}")
    shapes_text = ns.shapes if ns.shapes is not None else ("" if ns.grid else "8192x8192x8192")
    refs_default = ",".join(REFERENCES_FOR_GRID) if ns.grid else "all_reduce,all_gather"
    return SweepConfig(
        world_sizes=_ints("--world_sizes", ns.world_sizes),
        shapes=_triples("--shapes", shapes_text) if shapes_text or ns.shapes is not None else [],
        datatypes=_choices("--datatypes", ns.datatypes, DATATYPES),
        grid=ns.grid,
        algorithms=_choices("--algorithms", ns.algorithms, ALGORITHMS, allow_none=True),
        modes=_choices("--modes", ns.modes, SWEEP_MODES) if ns.modes is not None else _default_modes(ns),
        gemm_sms=_ints("--gemm_sms", ns.gemm_sms, allow_default=True),
        no_split_modes=_choices("--no_split_modes", ns.no_split_modes, MODES, allow_none=True),
        total_sms=ns.total_sms,
        blocks=_triples("--blocks", ns.blocks, allow_default=True),
        iters=ns.iters, warmup=ns.warmup, validate=ns.validate or ns.grid is not None, trace_tiles=ns.trace_tiles,
        references=_choices("--references", ns.references if ns.references is not None else refs_default,
                            COLLECTIVES, allow_none=True),
        logdir=Path(ns.logdir), figdir=Path(ns.figdir), launcher=ns.launcher, python=ns.python,
        benchmark_script=Path(ns.benchmark_script), bench_args=shlex.split(ns.bench_args),
        ref_args=shlex.split(ns.ref_args), run_timeout_s=ns.run_timeout_s, dry_run=ns.dry_run,
        plot=not ns.no_plot, skip_failed=ns.skip_failed,
    )


# ----------------------------------------------------------------------------------- planning
def resolve_launcher(choice: str) -> str:
    if choice != "auto":
        return choice
    return "mpirun" if shutil.which("mpirun") else "torchrun"


def launch_prefix(launcher: str, world_size: int, python: str) -> list[str]:
    """The launcher part of a command, ending where the script or `-m module` goes."""
    if launcher == "mpirun":
        cmd = ["mpirun"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        return [*cmd, "--oversubscribe", "-np", str(world_size), python]
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(world_size)]


def bench_name(alg: str, mode: str, dt: str, shape: tuple[int, int, int], w: int, gemm_sms: int | None,
               total_sms: int | None, blocks: tuple[int, int, int] | None) -> str:
    m, n, k = shape
    g = "default" if gemm_sms is None else str(gemm_sms)
    t = "dev" if total_sms is None else str(total_sms)
    b = "default" if blocks is None else "x".join(map(str, blocks))
    return f"{alg}_{mode}_{dt}_{m}x{n}x{k}_w{w}_g{g}of{t}_b{b}"


def plan(cfg: SweepConfig) -> tuple[list[Run], list[str]]:
    """Every run of the sweep in order, and notes on combinations left out (sizes the world cannot split).

    Cells are (world size, shape, datatype). Within a cell the references come first in even cells and the
    cell's whole list is reversed in odd ones (ours first, the references in reverse order): a deterministic
    alternation, so neither side always runs first (stable peers)."""
    launcher = resolve_launcher(cfg.launcher)
    runs: list[Run] = []
    notes: list[str] = []
    index = 0
    for w in cfg.world_sizes:
        for shape, dt in cfg.cells():
            dims = dict(zip("mnk", shape))
            m, n, k = shape
            cell = {"m": m, "n": n, "k": k, "datatype": dt, "world_size": w, "index": index}
            cell_runs: list[Run] = []
            for coll in cfg.references:
                bad = [d for v in COLLECTIVES[coll] for d in SPLIT_DIMS[v] if dims[d] % w]
                if bad:
                    notes.append(f"reference {coll} {shape} W={w}: {bad[0].upper()} is not a multiple of {w}")
                    continue
                outputs = [cfg.logdir / default_log_name(v, dt, m, n, k, w) for v in COLLECTIVES[coll]]
                if set(outputs) <= {p for r in cell_runs for p in r.outputs}:  # e.g. after all_gather_gemm
                    notes.append(f"reference {coll} {shape} W={w}: its variants already run in this cell")
                    continue
                cmd = [*launch_prefix(launcher, w, cfg.python), "-m", "reference", "--collective", coll,
                       "-m", str(m), "-n", str(n), "-k", str(k), "--datatype", dt, "--iters", str(cfg.iters),
                       "--warmup", str(cfg.warmup), "--output_dir", str(cfg.logdir)]
                cmd += ["--validate"] if cfg.validate else []
                cell_runs.append(Run(f"ref_{coll}_{dt}_{m}x{n}x{k}_w{w}", "reference", cmd + cfg.ref_args, outputs,
                                     cell, {"collective": coll, "variants": list(COLLECTIVES[coll])}))
            for alg in cfg.algorithms:
                bad = [d for d in BENCH_SPLIT[alg] if dims[d] % w]
                if bad:
                    notes.append(f"{alg} {shape} W={w}: {bad[0].upper()} is not a multiple of {w}")
                    continue
                for mode in cfg.modes:
                    if mode != spec.AUTO and not spec.ALGORITHMS[alg].has_mode(mode):
                        notes.append(f"{alg} {shape}: mode {mode} is not built for it")
                        continue
                    every_sm = mode in spec.MODES and spec.MODES[mode].gemm_on_every_sm  # nothing to split
                    splits = [None] if mode in cfg.no_split_modes or every_sm else cfg.gemm_sms
                    for blocks in cfg.blocks:
                        for g in splits:
                            run = _bench_run(cfg, launcher, alg, mode, dt, shape, w, g, blocks)
                            run.cell = cell
                            run.what = {"algorithm": alg, "mode": mode, "family": FAMILY[alg], "gemm_sms": g}
                            cell_runs.append(run)
            runs += cell_runs[::-1] if index % 2 else cell_runs
            index += 1
    return runs, notes


def write_plan(runs: list[Run], logdir: Path) -> Path:
    """LOGDIR/sweep_plan.json: every run planned here or by an earlier sweep into the same folder (by name)."""
    path = logdir / "sweep_plan.json"
    try:
        old = json.loads(path.read_text()).get("runs", {})
    except (OSError, ValueError, AttributeError):
        old = {}
    new = {r.name: {"kind": r.kind, "cell": r.cell, **r.what, "order": i, "outputs": [p.name for p in r.outputs]}
           for i, r in enumerate(runs)}
    data = {"schema": "streamk-pgas/sweep-plan/1", "runs": {**old, **new}}
    logdir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)
    return path


def _bench_run(cfg: SweepConfig, launcher: str, alg: str, mode: str, dt: str, shape: tuple[int, int, int], w: int,
               gemm_sms: int | None, blocks: tuple[int, int, int] | None) -> Run:
    name = bench_name(alg, mode, dt, shape, w, gemm_sms, cfg.total_sms, blocks)
    out = cfg.logdir / f"{name}.json"
    m, n, k = shape
    cmd = [*launch_prefix(launcher, w, cfg.python), str(cfg.benchmark_script), "--algorithm", alg, "--mode", mode,
           "-m", str(m), "-n", str(n), "-k", str(k), "--datatype", dt]
    if gemm_sms is not None:
        cmd += ["--gemm_sms", str(gemm_sms)]
    if cfg.total_sms is not None:
        cmd += ["--total_sms", str(cfg.total_sms)]
    if blocks is not None:
        cmd += ["--BLK_M", str(blocks[0]), "--BLK_N", str(blocks[1]), "--BLK_K", str(blocks[2])]
    cmd += ["--iters", str(cfg.iters), "--warmup", str(cfg.warmup), "--benchmark"]
    cmd += ["--validate"] if cfg.validate else []
    cmd += ["--trace_tiles"] if cfg.trace_tiles else []
    cmd += ["--output_file", str(out), *cfg.bench_args]
    return Run(name, "benchmark", cmd, [out])


# ---------------------------------------------------------------------------------- execution
class Failures:
    """LOGDIR/failures.json: run name -> what failed, rewritten after every change."""

    def __init__(self, logdir: Path) -> None:
        self.path = logdir / "failures.json"
        try:
            self.data: dict[str, Any] = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            self.data = {}

    def record(self, run: Run, returncode: int, tail: str, seconds: float) -> None:
        self.data[run.name] = {
            "kind": run.kind, "command": shlex.join(run.command), "returncode": returncode,
            "output_tail": tail, "seconds": round(seconds, 1),
            "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        self._save()

    def clear(self, run: Run) -> None:
        if self.data.pop(run.name, None) is not None:
            self._save()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=2) + "\n")
        tmp.replace(self.path)


def execute(run: Run, cfg: SweepConfig) -> tuple[int, str, float]:
    """Run one command in its own process group, output to LOGDIR/output/NAME.log; (rc, output tail, seconds)."""
    log = cfg.logdir / "output" / f"{run.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    start = time.monotonic()
    with open(log, "w") as fh:
        fh.write(f"$ {shlex.join(run.command)}\n")
        fh.flush()
        proc = subprocess.Popen(run.command, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=cfg.run_timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            rc = 124
            fh.write(f"\nsweep: killed after {cfg.run_timeout_s:.0f} s (--run_timeout_s)\n")
        except KeyboardInterrupt:  # the run has its own session, so Ctrl-C must be passed on
            _stop(proc)
            raise
    tail = log.read_text(errors="replace")[-2000:]
    return rc, tail, time.monotonic() - start


def _stop(proc: subprocess.Popen) -> None:
    """Stop the run's own process group (the launcher and its ranks): SIGTERM, then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def run_sweep(cfg: SweepConfig) -> int:
    runs, notes = plan(cfg)
    for note in notes:
        print(f"sweep: left out {note}", file=sys.stderr)
    failures = Failures(cfg.logdir)
    plot_cmd = [cfg.python, str(ROOT / "results" / "plot.py"), str(cfg.logdir), "--out", str(cfg.figdir)]
    table_cmd = [cfg.python, str(ROOT / "results" / "grid_table.py"), str(cfg.logdir), "--out", str(cfg.figdir)]
    # several modes of a cell: the planner's auto against them (results/mode_table.py)
    modes_cmd = ([cfg.python, "-m", "results.mode_table", str(cfg.logdir), "--out", str(cfg.figdir)]
                 if len(set(cfg.modes) - {"auto"}) > 1 else None)
    if cfg.dry_run:
        for run in runs:
            state = "skip (log exists)" if run.done() else (
                "skip (failed before)" if cfg.skip_failed and run.name in failures.data else "run")
            print(f"[{state}] {shlex.join(run.command)}")
        if cfg.plot:
            print(f"[plot] {shlex.join(plot_cmd)}")
            print(f"[table] {shlex.join(table_cmd)}")
            if modes_cmd:
                print(f"[modes] {shlex.join(modes_cmd)}")
        return 0

    write_plan(runs, cfg.logdir)
    todo = [r for r in runs if not (r.done() or (cfg.skip_failed and r.name in failures.data))]
    counts = {"ran": 0, "skipped": len(runs) - len(todo), "failed": 0}
    print(f"sweep: {len(runs)} runs in {len({r.cell.get('index') for r in runs})} cells: {counts['skipped']} done "
          f"before (skipped), {len(todo)} to run; logs in {cfg.logdir}", file=sys.stderr, flush=True)
    start = time.monotonic()
    for i, run in enumerate(todo, 1):
        head = f"[{i}/{len(todo)}] {run.name}"
        print(f"{head} ...", file=sys.stderr, flush=True)
        rc, tail, seconds = execute(run, cfg)
        counts["ran"] += 1
        elapsed = time.monotonic() - start
        when = f"elapsed {_clock(elapsed)}, ETA {_clock(elapsed / i * (len(todo) - i))}"
        if rc != 0 or not run.done():
            counts["failed"] += 1
            failures.record(run, rc, tail, seconds)
            print(f"{head}: FAILED (exit {rc}, {seconds:.1f} s; {when}; see "
                  f"{cfg.logdir / 'output' / (run.name + '.log')})", file=sys.stderr, flush=True)
        else:
            failures.clear(run)
            print(f"{head}: ok ({seconds:.1f} s; {when})", file=sys.stderr, flush=True)
    print(f"sweep: {len(runs)} runs: {counts['ran']} ran, {counts['skipped']} skipped (done before), "
          f"{counts['failed']} failed" + (f" (listed in {failures.path})" if counts["failed"] else "")
          + f" in {_clock(time.monotonic() - start)}", file=sys.stderr)
    if cfg.plot:
        subprocess.run(plot_cmd, check=False)
        subprocess.run(table_cmd, check=False)
        if modes_cmd:
            subprocess.run(modes_cmd, check=False, cwd=ROOT)
    return 1 if counts["failed"] else 0


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_config(argv)
    except (SweepError, ConfigError) as exc:  # one line naming the flag
        print(f"sweep: error: {exc}", file=sys.stderr)
        return 2
    return run_sweep(cfg)


if __name__ == "__main__":
    sys.exit(main())
