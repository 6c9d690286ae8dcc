"""Bad input, table-driven, across benchmark.py, `python -m reference` and run.sh: every case exits with
code 2 before any work, prints exactly one non-empty line on stderr, which names the flag (or the
environment variable) first and says what is valid, prints nothing on stdout, and leaves no
shared-memory file behind (README: exit codes).

Most cases run as one plain process each (world size 1: flags are checked before any kernel or process
group), several at a time. Most of benchmark.py's run its main() one after another in a single process
(tests/inprocess_main.py: importing torch and triton takes seconds, checking a command line
milliseconds); the others, each flavour of check among them, run as `python benchmark.py`. A few run
under `mpirun -np 2` to show that every rank exits 2 and only one line is printed.

The runs put their shared-memory files (the heap's, IRIS_OPS_SHM_DIR, and Open MPI's sm_segment.*,
OMPI_MCA_btl_sm_backing_directory) in a folder of their own instead of /dev/shm, which must be empty
afterwards: other jobs on the machine use /dev/shm at the same time, and their files must not count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import MPI_DIR, REPO_ROOT, leftovers, on_gpu, run_mpi, shm_env, skip_unless_ranks

BENCH = str(REPO_ROOT / "benchmark.py")
RUN_SH = str(REPO_ROOT / "run.sh")
HUGE = "1099511627776"  # 2^40
HUGER = "100000000000000000000000"  # 1e23
PREFIX = {"bench": "benchmark.py: error: ", "ref": "python -m reference: error: ", "run.sh": "run.sh: error: "}


@dataclass(frozen=True)
class Case:
    tool: str  # "bench", "ref" or "run.sh"
    args: tuple[str, ...]
    flag: str  # what the line must name first (a flag, or an environment variable)
    also: tuple[str, ...] = ()  # more text the line must hold (the valid range, the sizes, ...)
    env: tuple[tuple[str, str], ...] = field(default=())
    own_process: bool = True  # False: benchmark.py's main() in the shared process (tests/inprocess_main.py)

    @property
    def id(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env)
        return f"{self.tool}: {env + ' ' if env else ''}{' '.join(self.args)}"[:90]


def bench(*args: str, flag: str, also: tuple[str, ...] = (), env: tuple[tuple[str, str], ...] = (),
          own_process: bool = False) -> Case:
    return Case("bench", args, flag, also, env, own_process)


def ref(*args: str, flag: str, also: tuple[str, ...] = ()) -> Case:
    return Case("ref", args, flag, also)


def run_sh(*args: str, flag: str, also: tuple[str, ...] = ()) -> Case:
    return Case("run.sh", args, flag, also)


# {file}: an existing regular file; {dir}: an existing folder; {tmp}: a folder to write into; {traced}: a folder
# holding a folder run.timeline.json; {not_json}, {a_list}: files that are not tuning caches.
CASES: list[Case] = [
    # --- benchmark.py: malformed or missing values (argparse would print its usage block on every rank)
    bench("-m", "abc", flag="-m", also=("[1, 2147483647]",), own_process=True),
    bench("-m", flag="-m", also=("expected one argument",)),
    bench("--gemm_sms", "1,abc", flag="--gemm_sms", also=("'abc'",)),
    bench("--sk_rounds", "two", flag="--sk_rounds"),
    bench("--BLK", "32", flag="--BLK", also=("ambiguous",)),
    bench("--bogus", flag="--bogus", also=("unknown flag",)),
    # --- sizes and counts out of range, huge integers included
    bench("-m", HUGE, flag="-m", also=("[1, 2147483647]",)),
    bench("-k", HUGER, flag="-k", also=("[1, 2147483647]",)),
    bench("-n", "-5", flag="-n"),
    bench("-m", "0", flag="-m"),
    bench("-m", "65536", "-n", "65536", "-k", "64", flag="-m/-n/-k", also=("32-bit", "4294967296"), own_process=True),
    bench("--iters", "0", flag="--iters", also=("[1, 1000000]",)),
    bench("--warmup", "-1", flag="--warmup"),
    bench("--seed", HUGER, flag="--seed", also=("4294967295",)),
    bench("--gsize_m", "0", flag="--gsize_m"),
    bench("--validate_iters", "0", flag="--validate_iters"),
    bench("--heap_size", "1000", flag="--heap_size"),
    bench("--timeout_s", "nan", flag="--timeout_s", also=("(0, 86400]",)),
    bench("--timeout_s", "inf", flag="--timeout_s"),
    bench("--timeout_s", "0", flag="--timeout_s"),
    # --- the split, tiles and kernel knobs (were tests/test_benchmark.py's table)
    bench("--gemm_sms", "4", "--total_sms", "4", flag="--gemm_sms"),
    bench("--total_sms", "100000", flag="--total_sms"),
    bench("--BLK_M", "48", flag="--BLK_M"),
    bench("--BLK_N", "8", flag="--BLK_N"),
    bench("--COMMUNICATION_TILE_N", "64", "--BLK_N", "32", flag="--COMMUNICATION_TILE_N"),
    bench("--datatype", "fp8", flag="--datatype"),
    bench("--algorithm", "ring", flag="--algorithm"),
    bench("--mode", "overlapped", flag="--mode"),
    bench("--mode", "copy_engine", "--algorithm", "all_reduce", flag="--mode", also=("all_scatter",)),
    bench("--mode", "copy_engine", "--algorithm", "all_scatter", "--gemm_sms", "2", "--total_sms", "4",
          flag="--gemm_sms", also=("every SM",)),
    bench("--heap_size", str(1 << 20), "-m", "1024", "-n", "1024", "-k", "64", flag="--heap_size"),
    bench("--num_warps", "3", flag="--num_warps"),
    bench("--datatype", "int8", "--BLK_K", "16", flag="--BLK_K"),
    bench("--start_sync", "never", flag="--start_sync"),
    bench("--sk_first", "maybe", flag="--sk_first"),
    bench("--sk_rounds", "5", flag="--sk_rounds"),
    # --- output paths, checked before any work
    bench("--output_file", "{file}/run.json", flag="--output_file", also=("is a file",), own_process=True),
    bench("--output_file", "/proc/streamk_pgas/run.json", flag="--output_file", also=("no file can be made",)),
    bench("--output_file", "{dir}", flag="--output_file", also=("is a folder",)),
    bench("--output_file", "{tmp}/{nope}.json", flag="--output_file", also=("{nope}",)),
    bench("--mode", "fused,two_streams", "--output_file", "{tmp}/{algorithm}.json", flag="--output_file",
          also=("both write",)),
    bench("--output_file", "/dev/full", flag="--output_file", also=("/dev/full is not a regular file",)),
    bench("--trace_tiles", "--output_file", "{traced}/run.json", flag="--trace_tiles",
          also=("run.timeline.json is a folder",)),
    bench("--tuning_cache", "{dir}", flag="--tuning_cache", also=("cannot read", "give a file")),
    bench("--tuning_cache", "{not_json}", flag="--tuning_cache", also=("is not a tuning cache (not JSON",)),
    *([bench("--tune", "--tuning_cache", "{dir}", flag="--tuning_cache"),
       bench("--tune", "--tuning_cache", "{a_list}", flag="--tuning_cache", also=("a JSON list, not an object",))]
      if on_gpu() else [bench("--tune", flag="--tune", also=("never reads the tuning cache",))]),
    bench("--tune", "0", flag="--tune", also=("[1, 16]",)),
    bench("--output_file", "", flag="--output_file", also=("is empty",)),
    bench("--tuning_cache", "", flag="--tuning_cache", also=("is empty",)),
    bench("--COMMUNICATION_TILE_N", "0", flag="--COMMUNICATION_TILE_N", also=(">= 1",)),
    bench("--nproc", "0", flag="--nproc", also=("[1, 1024]",)),
    # --- a heap that does not fit, with the sizes
    *([bench("--heap_size", str(1 << 45), flag="--heap_size", also=(str(1 << 45), "B free"), own_process=True)]
      if not on_gpu() else []),
    # --- environment
    bench(flag="IRIS_OPS_TIMEOUT_S", env=(("IRIS_OPS_TIMEOUT_S", "abc"),), own_process=True),
    bench(flag="IRIS_OPS_TIMEOUT_S", env=(("IRIS_OPS_TIMEOUT_S", "-1"),)),
    bench(flag="IRIS_OPS_TIMEOUT_S", env=(("IRIS_OPS_TIMEOUT_S", "nan"),)),
    bench(flag="IRIS_OPS_BACKEND", env=(("IRIS_OPS_BACKEND", "bogus"),)),
    *([bench(flag="IRIS_OPS_BACKEND", also=("GPU",), env=(("IRIS_OPS_BACKEND", "cuda"),))] if not on_gpu() else []),
    bench(flag="IRIS_OPS_TIMEOUT_S", also=("[5, 86400]",), env=(("IRIS_OPS_TIMEOUT_S", "0.5"),)),
    bench(flag="IRIS_OPS_SHM_DIR", also=("does not exist",), env=(("IRIS_OPS_SHM_DIR", "/nonexistent"),)),
    bench(flag="IRIS_OPS_SHM_DIR", also=("is not a folder",), env=(("IRIS_OPS_SHM_DIR", "/etc/hostname"),)),
    bench(flag="IRIS_OPS_TIMEOUTS", also=("unknown variable",), env=(("IRIS_OPS_TIMEOUTS", "30"),)),
    bench(flag="STREAMK_PGAS_STEP_GRAPH", also=("0 or 1", "'maybe'"), env=(("STREAMK_PGAS_STEP_GRAPH", "maybe"),)),
    bench(flag="STREAMK_PGAS_FAST_LAUNCH", also=("0 or 1",), env=(("STREAMK_PGAS_FAST_LAUNCH", "2"),)),
    bench(flag="STREAMK_PGAS_CE_PULL", also=("0 or 1",), env=(("STREAMK_PGAS_CE_PULL", "pull"),)),
    bench(flag="STREAMK_PGAS_CE_A_COLUMNS", also=("0 or 1",), env=(("STREAMK_PGAS_CE_A_COLUMNS", "cols"),)),
    bench(flag="STREAMK_PGAS_SHARE_GPU", also=("0 or 1",), env=(("STREAMK_PGAS_SHARE_GPU", "yes"),)),
    bench(flag="STREAMK_PGAS_STEPGRAPH", also=("unknown variable", "STREAMK_PGAS_STEP_GRAPH"),
          env=(("STREAMK_PGAS_STEPGRAPH", "0"),)),
    bench(flag="TRITON_INTERPRET", also=("0 or 1", "'true'"), env=(("TRITON_INTERPRET", "true"),)),
    *([bench(flag="TRITON_INTERPRET", also=("torch sees none", "leave it unset"), env=(("TRITON_INTERPRET", "0"),))]
      if not on_gpu() else []),
    # --- python -m reference
    ref("-m", "abc", flag="-m/--m", also=("[1, 2147483647]",)),
    ref("-k", flag="-k/--k", also=("expected one argument",)),
    ref("-m", HUGE, flag="-m/--m", also=("[1, 2147483647]",)),
    ref("--n", HUGER, flag="-n/--n"),
    ref("--iters", "10000000", flag="--iters", also=("1000000",)),
    ref("--warmup", "-1", flag="--warmup"),
    ref("--seed", "99999999999", flag="--seed"),
    ref("--timeout_s", "nan", flag="--timeout_s"),
    ref("--timeout_s", "inf", flag="--timeout_s"),
    ref("--timeout_s", "-5", flag="--timeout_s"),
    ref("--collective", "broadcast", flag="--collective"),
    ref("--datatype", "fp8", flag="--datatype"),
    ref("--gather_layout", "diagonal", flag="--gather_layout"),
    ref("--frobnicate", flag="--frobnicate"),
    ref("--output_dir", "{file}", flag="--output_dir", also=("not a folder",)),
    ref("--output_file", "", flag="--output_file", also=("is empty",)),
    ref("--output_dir", "{file}/logs", flag="--output_dir", also=("is a file",)),
    ref("--output_file", "/proc/streamk_pgas/ref.json", flag="--output_file"),
    ref("--output_file", "{dir}", flag="--output_file", also=("is a folder",)),
    *([ref("--device", "cuda", flag="--device", also=("no GPU",))] if not on_gpu() else []),
    # --- run.sh: its own flags, and the reference's, checked before any rank is launched
    run_sh("-n", "2", "-c", "all_reduce", "-m", "abc", flag="-m/--m"),
    run_sh("-n", "2", "-c", "all_reduce", "-k", "63", flag="-k", also=("multiple of 2",)),
    run_sh("-n", "2", "-l", "torchrun", "-c", "gemm", "--n", HUGE, flag="-n/--n"),
    run_sh("-n", "2", "-c", "gemm", "--output_dir", "{file}/logs", flag="--output_dir"),
    run_sh("-n", "2", "-c", "gemm", "--timeout_s", "nan", flag="--timeout_s"),
    run_sh("-n", "2", "-c", "gemm", "--", "--iters", "0", flag="--iters"),
    run_sh("-n", "2", "-c", "gemm", "-l", "srun", flag="-l"),
    run_sh("-n", "two", "-c", "gemm", flag="-n"),
    run_sh("-n", "2", "-c", "bogus", flag="-c"),
    run_sh("-n", "2", "-c", flag="-c", also=("needs a value",)),
]


def _plain_env(**extra: str) -> dict[str, str]:
    """The environment of a plain process: no launcher's variables, the repo on the path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX_", "PMI_", "IRIS_OPS_")) and k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHON"] = sys.executable
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if not on_gpu():
        env["TRITON_INTERPRET"] = "1"
    env.update(extra)
    return env


def _command(case: Case, places: dict[str, str]) -> list[str]:
    args = list(case.args)
    for name, path in places.items():
        args = [a.replace(f"{{{name}}}", path) for a in args]
    if case.tool == "bench":
        return [sys.executable, BENCH, *args]
    if case.tool == "ref":
        return [sys.executable, "-m", "reference", *args]
    return [RUN_SH, *args]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.CompletedProcess, float]]:
    """Every single-process case, several at a time (most of their time is importing torch)."""
    tmp = tmp_path_factory.mktemp("bad_inputs")
    (tmp / "a_file").write_text("not a folder\n")
    (tmp / "a_dir").mkdir()
    (tmp / "out").mkdir()
    (tmp / "traced" / "run.timeline.json").mkdir(parents=True)
    (tmp / "not_json").write_text("{not json")
    (tmp / "a_list").write_text("[]")
    places = {"file": str(tmp / "a_file"), "dir": str(tmp / "a_dir"), "tmp": str(tmp / "out"),
              "traced": str(tmp / "traced"), "not_json": str(tmp / "not_json"), "a_list": str(tmp / "a_list")}
    shm_dir = tmp / "shm"
    env = shm_env(shm_dir)

    def one(case: Case) -> tuple[subprocess.CompletedProcess, float]:
        start = time.monotonic()
        proc = subprocess.run(_command(case, places), capture_output=True, text=True, timeout=120,
                              cwd=tmp / "out", env=_plain_env(**env, **dict(case.env)))
        return proc, time.monotonic() - start

    shared = [c for c in CASES if not c.own_process]

    def in_one_process() -> dict[str, tuple[subprocess.CompletedProcess, float]]:
        start = time.monotonic()
        todo = [{"argv": _command(c, places)[2:], "env": dict(c.env)} for c in shared]
        proc = subprocess.run([sys.executable, str(Path(__file__).with_name("inprocess_main.py"))],
                              input=json.dumps(todo), capture_output=True, text=True, timeout=300, cwd=tmp / "out",
                              env=_plain_env(**env))
        assert proc.returncode == 0, proc.stderr[-4000:]
        each = (time.monotonic() - start) / max(1, len(shared))
        return {c.id: (subprocess.CompletedProcess(c.args, r["code"], r["stdout"], r["stderr"]), each)
                for c, r in zip(shared, json.loads(proc.stdout))}

    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 2)) as pool:
        batch = pool.submit(in_one_process)
        out = dict(zip((c.id for c in CASES if c.own_process),
                       pool.map(one, [c for c in CASES if c.own_process])))
        out.update(batch.result())
    assert leftovers(shm_dir) == [], "shared-memory files left by the bad-input runs"
    assert sorted(p.name for p in (tmp / "out").iterdir()) == [], "a refused run wrote something"
    assert (tmp / "not_json").read_text() == "{not json" and (tmp / "a_list").read_text() == "[]"
    return out


def test_at_least_40_cases() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)
    assert {c.tool for c in CASES} == {"bench", "ref", "run.sh"}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_exit_2(case: Case, results: dict) -> None:
    proc, elapsed = results[case.id]
    shown = (f"exit {proc.returncode} after {elapsed:.1f} s\nstdout:\n{proc.stdout[-2000:]}\n"
             f"stderr:\n{proc.stderr[-3000:]}")
    assert proc.returncode == 2, shown
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, shown
    prefix = PREFIX[case.tool]
    assert lines[0].startswith(prefix), shown
    said = lines[0][len(prefix):]
    assert said.startswith(case.flag), f"the line should name {case.flag} first: {lines[0]}"
    for text in case.also:
        assert text in said, f"{text!r} not in: {lines[0]}"
    assert proc.stdout.strip() == "", shown


# ------------------------------------------------------------------------------- under mpirun
EXIT = MPI_DIR / "exit_status.py"


def _mpi_case(tmp: Path, *args: str, env: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Run under mpirun -np 2: (every rank's 'EXIT_STATUS' line, from the files tests/mpi/exit_status.py
    writes; the non-empty lines printed that are neither those nor mpirun's own report), after checking
    that no shared-memory file is left."""
    skip_unless_ranks(2)
    shm_dir, status_dir = tmp / "shm", tmp / "status"
    status_dir.mkdir(parents=True)
    res = run_mpi(2, EXIT, *args, check=False, timeout=120,
                  env={**shm_env(shm_dir), "EXIT_STATUS_DIR": str(status_dir), **(env or {})})
    assert not res.timed_out, res.stdout[-4000:]
    assert leftovers(shm_dir) == [], res.stdout[-3000:]
    assert res.returncode == 2, res.stdout[-4000:]
    lines, in_report = [], False
    for line in res.stdout.splitlines():
        if line.startswith("-" * 20):  # mpirun's report of a non-zero exit sits between two such rules
            in_report = not in_report
        elif line.strip() and not in_report and not line.startswith("EXIT_STATUS "):
            lines.append(line)
    exits = sorted(f.read_text().strip() for f in status_dir.iterdir())
    return exits, lines


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        ((BENCH, "-m", "abc"), None, "benchmark.py: error: -m: must be an integer in [1, 2147483647]"),
        ((BENCH, "--output_file", "/proc/streamk_pgas/run.json"), None, "benchmark.py: error: --output_file: "),
        ((BENCH, "--algorithm", "all_reduce", "-k", "63", "-m", "64", "-n", "64"), None,
         "benchmark.py: error: -k: all_reduce splits K over 2 ranks"),
        ((BENCH, "--algorithm", "all_scatter", "-n", "63", "-m", "64", "-k", "64"), None,
         "benchmark.py: error: -n: all_scatter splits N over 2 ranks"),
        ((BENCH,), {"IRIS_OPS_TIMEOUT_S": "abc"}, "benchmark.py: error: IRIS_OPS_TIMEOUT_S: "),
        (("-m", "reference", "--collective", "all_reduce", "-m", "abc"), None,
         "python -m reference: error: -m/--m: must be an integer"),
    ],
    ids=["bench -m abc", "bench output", "bench split K", "bench split N", "bench IRIS_OPS_TIMEOUT_S", "ref -m abc"],
)
def test_every_rank_exits_2_and_one_line_is_printed(args: tuple[str, ...], env: dict[str, str] | None,
                                                     line: str, tmp_path: Path) -> None:
    exits, lines = _mpi_case(tmp_path, *args, env=env)
    assert exits == ["EXIT_STATUS rank 0 code 2", "EXIT_STATUS rank 1 code 2"], (exits, lines)
    assert len(lines) == 1 and lines[0].startswith(line), lines


# ------------------------------------------------------------------------------- under torchrun
@pytest.mark.parametrize(("command", "prog"), [
    ([BENCH], "benchmark.py"),
    (["-m", "streamk_pgas", "bench"], "streamk-pgas bench"),
], ids=["benchmark.py", "streamk-pgas bench"])
def test_torchrun_bad_input_is_one_line_and_exit_2(command: list[str], prog: str, tmp_path: Path) -> None:
    """`python -m iris_ops.torchrun` (torchrun, ending as mpirun jobs end): exit 2, one line from rank 0, no
    traceback, nothing left in shared memory."""
    skip_unless_ranks(2)
    shm_dir = tmp_path / "shm"
    proc = subprocess.run([sys.executable, "-m", "iris_ops.torchrun", "--standalone", "--nproc-per-node", "2",
                           *command, "-m", "abc"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=_plain_env(**shm_env(shm_dir)))
    out = proc.stdout + proc.stderr
    lines = [line for line in out.splitlines() if line.strip()]
    assert proc.returncode == 2, out
    assert lines == [f"{prog}: error: -m: must be an integer in [1, 2147483647], got 'abc'"], out
    assert leftovers(shm_dir) == [], out
