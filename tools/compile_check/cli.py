"""python -m tools.compile_check: build every kernel the project launches for GPU targets, without a GPU."""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from streamk_pgas.harness.checks import ConfigError, OneLineParser, int_in
from streamk_pgas.tools.compile_check.build import Build, result_for, specialise
from streamk_pgas.tools.compile_check.kernels import DEFAULT_GROUPS, GROUPS, OP_WORLDS, launch_specs, not_built
from streamk_pgas.tools.compile_check.report import Row, document, failure_lines, table
from streamk_pgas.tools.compile_check.targets import TARGETS, BuildTarget

DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "streamk-pgas" / "compile_check"

# (target, build) pairs the pool's workers compile: set before the pool forks, so workers inherit them
_WORK: list[tuple[BuildTarget, Build]] = []
_CACHE_DIR: Path | None = None


def _names(flag: str, text: str, valid: dict[str, Any]) -> list[str]:
    names = [x for x in text.split(",") if x]
    bad = [x for x in names if x not in valid]
    if bad or not names:
        raise ConfigError(flag, f"must be a comma list of {', '.join(valid)}; got {text!r}")
    return list(dict.fromkeys(names))


def _worlds(text: str) -> list[int] | None:
    if text == "":
        return None
    items = text.split(",")
    if not all(x.isdigit() and 1 <= int(x) <= 64 for x in items):
        raise ConfigError("--worlds", f"must be a comma list of world sizes in [1, 64]; got {text!r}")
    return sorted({int(x) for x in items})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = OneLineParser(prog="python -m tools.compile_check", description=__doc__)
    worlds = "; ".join(f"{t} {','.join(map(str, w))}" for t, w in OP_WORLDS.items())
    ap.add_argument("--targets", default=",".join(TARGETS), help=f"comma list of {', '.join(TARGETS)}")
    ap.add_argument("--groups", default=",".join(DEFAULT_GROUPS), help=f"comma list of {', '.join(GROUPS)}")
    ap.add_argument("--worlds", default="", help="comma list of the world sizes the op's launches are planned for, "
                    f"on every target (groups op, op_bench; 1: the GEMM alone); default per target: {worlds}")
    ap.add_argument("--jobs", type=int_in(1, 256), default=os.cpu_count() or 1, help="compiles at once")
    ap.add_argument("--json", default="out/compile_check.json", help="where to write the results ('' for nowhere)")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="results cache directory")
    ap.add_argument("--no_cache", action="store_true", help="compile everything again")
    ap.add_argument("--list", action="store_true", help="list the launches and distinct builds, compile nothing")
    args = ap.parse_args(argv)
    args.target_list = _names("--targets", args.targets, TARGETS)
    args.group_list = _names("--groups", args.groups, GROUPS)
    args.world_list = _worlds(args.worlds)
    return args


def _check_compiled_mode() -> None:
    """The kernels must be Triton JIT functions: under TRITON_INTERPRET=1 they are interpreted, not compiled."""
    from triton.runtime.jit import JITFunction

    from streamk_pgas.stream_k.kernel import streamk_gemm_kernel

    if not isinstance(streamk_gemm_kernel, JITFunction):
        raise ConfigError("TRITON_INTERPRET", "must be unset or 0 when the kernels are imported (the interpreter "
                          "compiles nothing); run as python -m tools.compile_check")


def collect(targets: list[BuildTarget], groups: list[str], worlds: list[int] | None = None
            ) -> tuple[list[Row], list[str]]:
    """Every launch spec of every target, grouped by build (launches that compile to the same kernel share one)."""
    rows: dict[tuple[str, str], Row] = {}
    broken: list[str] = []
    for target in targets:
        for spec in launch_specs(target, groups, worlds):
            try:
                build = specialise(spec, target)
            except Exception as exc:  # an argument the JIT cannot specialise: the launch would fail too
                broken.append(f"{target.name} {spec.name} [{spec.config}]: cannot specialise: "
                              f"{type(exc).__name__}: {exc}")
                continue
            row = rows.setdefault((target.name, build.key), Row(target, [], build))
            row.specs.append(dataclasses.replace(spec, args={}))  # the tensors go; the build has what it needs
    return list(rows.values()), broken


def _work(i: int) -> dict[str, Any]:
    target, build = _WORK[i]
    return result_for(build, target, _CACHE_DIR)


def run_builds(rows: list[Row], jobs: int, cache_dir: Path | None) -> None:
    """Compile every row's build (cached results first), `jobs` at a time, the GEMM-bearing ones first (the
    longest)."""
    global _WORK, _CACHE_DIR
    _CACHE_DIR = cache_dir
    order = sorted(range(len(rows)), key=lambda i: "TILING.BLK_K" not in rows[i].build.constexprs)
    _WORK = [(rows[i].target, rows[i].build) for i in order]
    if jobs > 1 and len(_WORK) > 1:
        with multiprocessing.get_context("fork").Pool(min(jobs, len(_WORK))) as pool:
            results = pool.map(_work, range(len(_WORK)), chunksize=1)
    else:
        results = [_work(i) for i in range(len(_WORK))]
    for i, result in zip(order, results):
        rows[i].result = result


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        _check_compiled_mode()
    except ConfigError as exc:
        print(f"compile_check: {exc}", file=sys.stderr)
        return 2
    import triton

    t0 = time.perf_counter()
    cache_dir = None if args.no_cache else Path(args.cache).expanduser()
    # Triton's binaries in a directory of the check's own: the vendor's code paths are not part of Triton's cache
    # key (iris_ops.device.set_compile_arch); with --no_cache a fresh one, so everything is compiled
    scratch = tempfile.TemporaryDirectory(prefix="compile_check_") if cache_dir is None else None
    triton.knobs.cache.dir = scratch.name if scratch is not None else str(cache_dir / "triton")
    targets = [TARGETS[n] for n in args.target_list]
    rows, broken = collect(targets, args.group_list, args.world_list)
    if args.list:
        for row in rows:
            print(f"{row.target.name:7} {row.head.name:22} {row.head.config:40} {len(row.specs):3} launches")
        for target in targets:
            for line in not_built(target, args.group_list):
                print(f"{target.name:7} not built (the target cannot run it): {line}")
        print(f"{sum(len(r.specs) for r in rows)} launches, {len(rows)} distinct builds")
        return 1 if broken else 0
    run_builds(rows, args.jobs, cache_dir)
    elapsed = time.perf_counter() - t0
    print(f"triton {triton.__version__}; {sum(len(r.specs) for r in rows)} launches, {len(rows)} distinct builds, "
          f"{sum(1 for r in rows if not r.result.get('cached'))} compiled, {elapsed:.0f} s, {args.jobs} jobs")
    skipped = {t.name: not_built(t, args.group_list) for t in targets}
    for target in targets:
        print(f"\n{target.describe()}")
        print(table(target, [r for r in rows if r.target is target]))
        for line in skipped[target.name]:
            print(f"not built (the target cannot run it): {line}")
    failures = broken + failure_lines(rows)
    if args.json:
        doc = document(rows, targets, {"triton": triton.__version__, "elapsed_s": round(elapsed, 1),
                                       "groups": args.group_list, "worlds": args.world_list})
        doc["failures"] = failures
        for name, lines in skipped.items():
            doc["targets"][name]["not_built"] = lines
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1, default=str))
        print(f"\nresults: {path}")
    if failures:
        print(f"\n{len(failures)} failure(s):", file=sys.stderr)
        for line in failures:
            print(f"FAIL {line}", file=sys.stderr)
        return 1
    known = sum(1 for r in rows if r.known() is not None)
    print(f"\nall builds compile and fit; no default configuration spills"
          f"{f' ({known} builds with known issues, marked ~: tools/compile_check/known_issues.py)' if known else ''}")
    return 0
