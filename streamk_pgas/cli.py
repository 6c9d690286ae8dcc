"""`streamk-pgas COMMAND [flags]`: the project's command line, installed by `pip install .`.

    streamk-pgas quickstart [--np N] [flags]   the main job: N ranks (2) on this machine, one_shot validated and
                                               timed, the log under ./streamk_pgas_logs/ (torchrun: no MPI needed)
    streamk-pgas bench [flags]                 the benchmark (benchmark.py's flags): one process is one rank; under
                                               `mpirun -np N` or torchrun, each process one rank
    streamk-pgas reference [flags]             the vendor baselines (python -m reference)
    streamk-pgas plot LOGS... [--out DIR]      figures and a table from run logs (results/plot.py)

Every command's `--help` lists its flags. Exit codes: 0 ok, 1 a failure, 2 bad input (one line naming it), 130
interrupted.
"""

from __future__ import annotations

import sys
import time

PROG = "streamk-pgas"
COMMANDS = ("quickstart", "bench", "reference", "plot")
QUICKSTART = ("--algorithm", "one_shot", "--validate", "--benchmark")


def usage() -> str:
    return __doc__.split("\n\n")[1]


def quickstart(argv: list[str]) -> int:
    """N ranks of `bench` with the quick start's flags (then `argv`), through iris_ops.torchrun on this machine."""
    ranks = 2
    if argv[:1] == ["--np"]:
        try:
            ranks = int(argv[1])
        except (IndexError, ValueError):
            ranks = 0
        if not 1 <= ranks <= 64:
            print(f"{PROG} quickstart: error: --np: must be an integer in [1, 64], got "
                  f"{argv[1] if len(argv) > 1 else 'nothing'}", file=sys.stderr)
            return 2
        argv = argv[2:]
    log = [] if "--output_file" in argv else ["--output_file",
                                              f"streamk_pgas_logs/quickstart_{time.strftime('%Y%m%d-%H%M%S')}.json"]
    launch = ["--standalone", "--nproc-per-node", str(ranks), "-m", "streamk_pgas", "bench", *QUICKSTART, *log, *argv]
    print(f"+ python -m iris_ops.torchrun {' '.join(launch)}", file=sys.stderr, flush=True)
    from iris_ops.torchrun import main as torchrun

    return torchrun(launch)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {PROG} COMMAND [flags]\n\n{usage()}")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "quickstart":
        return quickstart(rest)
    if command == "bench":
        from streamk_pgas.bench import entry

        return entry(rest, f"{PROG} bench")
    if command == "reference":
        from reference.cli import entry as reference

        return reference(rest, f"{PROG} reference")
    if command == "plot":
        from results.plot import main as plot

        return plot(rest)
    print(f"{PROG}: error: unknown command {command!r}; one of {', '.join(COMMANDS)} (see {PROG} --help)",
          file=sys.stderr)
    return 2
