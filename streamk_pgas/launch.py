"""Start N ranks of a command on this machine: `streamk-pgas bench --nproc N ...`, `streamk-pgas quickstart`.

mpirun where there is one (beside this Python, as `pip install .` puts Open MPI's there on Linux, else on PATH),
with the flags a plain `mpirun -np N` would need here: `--allow-run-as-root` when run as root (Open MPI refuses
root without it) and `--oversubscribe` (more ranks than cores is refused without it; the CPU backend runs any
number of ranks). Without mpirun, torchrun (iris_ops.torchrun). Under mpirun a failed rank aborts the job at once
(MPI_Abort), a stopped one included; torchrun's agent gives a rank that does not stop on SIGTERM (a stopped one)
30 s before it kills it, which is why mpirun comes first.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from streamk_pgas.iris_ops.bootstrap import launched_by
from streamk_pgas.iris_ops.errors import ConfigError

MAX_RANKS = 1024
ROOT = Path(__file__).resolve().parent.parent  # the repository (or site-packages): `-m streamk_pgas` is found here


def ranks_of(flag: str, text: str | None) -> int:
    """The value of a rank-count flag: an integer in [1, MAX_RANKS], else ConfigError naming the flag."""
    try:
        ranks = int(text) if text else 0
    except ValueError:
        ranks = 0
    if not 1 <= ranks <= MAX_RANKS:
        got = "nothing" if not text else text
        raise ConfigError(flag, f"must be an integer in [1, {MAX_RANKS}], got {got}")
    return ranks


def take_flag(argv: list[str], flag: str) -> tuple[str | None, list[str]]:
    """(the value of `flag` in argv, as `flag V` or `flag=V`, or None when absent; argv without it). A flag with no
    value gives the empty string, which ranks_of refuses."""
    rest: list[str] = []
    value: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == flag:
            value = argv[i + 1] if i + 1 < len(argv) else ""
            i += 2
            continue
        if arg.startswith(flag + "="):
            value = arg[len(flag) + 1:]
            i += 1
            continue
        rest.append(arg)
        i += 1
    return value, rest


def mpirun_path() -> str | None:
    beside = Path(sys.executable).parent / "mpirun"
    return str(beside) if beside.exists() else shutil.which("mpirun")


def command(ranks: int, python_args: list[str]) -> list[str]:
    """The command that starts `ranks` processes of `python <python_args>` on this machine."""
    mpirun = mpirun_path()
    if mpirun is not None:
        cmd = [mpirun]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        return [*cmd, "--oversubscribe", "-np", str(ranks), sys.executable, *python_args]
    return [sys.executable, "-m", "streamk_pgas.iris_ops.torchrun", "--standalone", "--nproc-per-node", str(ranks),
            *python_args]


def launch(ranks: int, python_args: list[str], flag: str = "--nproc") -> int:
    """Replace this process with the launcher of `ranks` ranks of `python <python_args>` (after one line on stderr
    showing the command). Refused (ConfigError naming `flag`) inside a launched job: the ranks would each start N."""
    if launched_by() != "single":
        raise ConfigError(flag, f"starts the ranks itself: leave it out under {launched_by()} (or run without one)")
    cmd = command(ranks, python_args)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    print(f"+ {' '.join(cmd)}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.execvpe(cmd[0], cmd, env)
    return 0  # not reached


def launch_bench(argv: list[str], prog: str) -> int | None:
    """benchmark.py's and `streamk-pgas bench`'s --nproc N, before they import torch: this process becomes the launcher
    of N ranks of the same command without it (the ranks run `streamk-pgas bench`, or benchmark.py where that is the
    prog). None when there is no --nproc (or --help is asked for: the help lists --nproc)."""
    nproc, rest = take_flag(argv, "--nproc")
    if nproc is None or any(a in ("-h", "--help") for a in rest):
        return None
    script = ["-m", "streamk_pgas", "bench"] if prog.startswith("streamk-pgas") else [str(ROOT / "benchmark.py")]
    return launch(ranks_of("--nproc", nproc), [*script, *rest])

