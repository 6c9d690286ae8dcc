"""`python -m reference`: parse and check the flags, start the world, run each variant, write the logs.

Exit codes:
  0  every variant that was asked for ran (and validated, with --validate), or was skipped because
     this machine cannot run it at all (an op torch lacks, symmetric memory on the CPU: the record's
     `skipped` says why);
  1  a variant failed (an allocation or its first step raised on some rank: the line says which
     rank and why, and no log is written for it, so a sweep reruns it), a validation failed, the
     process group could not start, a rank hit an error while timing, or a rank's GPU made no progress
     for --timeout_s (a peer stopped or died in a collective: harness.device_watch);
  2  a bad flag, an output path that cannot be written, or --device cuda without a GPU: one line on
     stderr naming the flag (from rank 0), on every rank, before any process group exists.
"""

from __future__ import annotations

import os
import sys

from streamk_pgas.iris_ops.bootstrap import launcher_world_size
from streamk_pgas.iris_ops.entry import EXIT_FAILED, run_main
from streamk_pgas.reference.config import (
    ConfigError,
    check_before_start,
    output_paths,
    parse_config,
)

PROG = "python -m reference"


def preflight(argv: list[str], world_size: int, prog: str = PROG) -> int:
    """Only the checks `main` makes before starting (run.sh calls this before it launches any rank):
    0 when the flags are good for `world_size` ranks, else one line on stderr and 2."""
    try:
        check_before_start(parse_config(argv, world_size), world_size)
    except ConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """The work; raises ConfigError for bad input (iris_ops.entry.run_main makes that one line and exit 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:  # a launcher's separator (run.sh passes `torchrun ... -m reference -- flags`)
        argv = argv[1:]
    world_size = launcher_world_size()
    cfg = parse_config(argv, world_size)
    check_before_start(cfg, world_size)

    # torch and the world only once the flags are known to be good.
    from streamk_pgas.harness.runlog import write_record
    from streamk_pgas.reference.runner import run_variant, summary_line
    from streamk_pgas.reference.world import init_world

    world = init_world(cfg.device, cfg.timeout_s, prog)
    paths = output_paths(cfg, world.world_size)
    failed = False
    for key in cfg.variants:
        record = run_variant(key, world, cfg)
        if record.get("failed"):
            failed = True
            if world.rank == 0:  # no log: the variant did not run (a sweep must not count it done)
                print(summary_line(record), file=sys.stderr, flush=True)
            continue
        if world.rank == 0:
            path = paths[key]
            if path is not None:
                write_record(record, path)
            print(summary_line(record) + (f" -> {path}" if path else ""), flush=True)
        failed |= record["validation"].get("passed") is False
    world.close()
    return 1 if failed else 0


def entry(argv: list[str] | None = None, prog: str = PROG) -> int:
    """main's exit code, every failure one line (iris_ops.entry.run_main: exit 2 for bad input, 1 for a failure,
    130 for Ctrl-C). After a failure the process ends at once: a peer is likely blocked in a collective, and an
    exit handler (mpi4py's MPI_Finalize) would wait for it; the launcher stops the rest."""
    code = run_main(lambda: main(argv, prog), prog)
    if code == EXIT_FAILED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
