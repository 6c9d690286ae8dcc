"""`streamk-pgas COMMAND [flags]`: the project's command line, installed by `pip install .`.

    streamk-pgas quickstart [--np N] [flags]   the main job: N ranks (2) on this machine, one_shot validated and
                                               timed, the log under ./streamk_pgas_logs/
    streamk-pgas bench [--nproc N] [flags]     the benchmark (benchmark.py's flags): --nproc N starts N ranks on
                                               this machine (mpirun with the flags it needs, as root too; else
                                               torchrun); without it one process is one rank, or each process of
                                               `mpirun -np N` or torchrun one rank
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
    """N ranks (--np, default 2) of `bench` with the quick start's flags (then `argv`) on this machine
    (streamk_pgas.launch: mpirun with the flags it needs here, else torchrun)."""
    from streamk_pgas.iris_ops.entry import run_main
    from streamk_pgas.launch import launch, ranks_of, take_flag

    given, argv = take_flag(argv, "--np")
    log = [] if any(a.split("=")[0] == "--output_file" for a in argv) else [
        "--output_file", f"streamk_pgas_logs/quickstart_{time.strftime('%Y%m%d-%H%M%S')}.json"]
    return run_main(lambda: launch(ranks_of("--np", "2" if given is None else given),
                                   ["-m", "streamk_pgas", "bench", *QUICKSTART, *log, *argv], "--np"),
                    f"{PROG} quickstart")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {PROG} COMMAND [flags]\n\n{usage()}")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "quickstart":
        return quickstart(rest)
    if command == "bench":
        from streamk_pgas.iris_ops.entry import run_main
        from streamk_pgas.launch import launch_bench

        # --nproc N, before torch is imported: a launch replaces this process, so a code that comes back is a
        # refusal's (run_main gives 0 where there is no --nproc)
        launched = run_main(lambda: launch_bench(rest, f"{PROG} bench"), f"{PROG} bench")
        if launched:
            return launched
        from streamk_pgas.bench import entry

        return entry(rest, f"{PROG} bench")
    if command == "reference":
        from streamk_pgas.reference.cli import entry as reference

        return reference(rest, f"{PROG} reference")
    if command == "plot":
        from streamk_pgas.results.plot import main as plot

        return plot(rest)
    print(f"{PROG}: error: unknown command {command!r}; one of {', '.join(COMMANDS)} (see {PROG} --help)",
          file=sys.stderr)
    return 2
