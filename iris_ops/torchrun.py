"""torchrun, ending as mpirun jobs end here: `python -m iris_ops.torchrun [torchrun options] script [args]`.

It runs torch.distributed.run in this process with the same options, and changes only how the launcher
itself ends. torchrun answers any failed worker with exit code 1 and a ~45-line ChildFailedError
traceback, and Ctrl-C with a SignalException traceback; the workers (wrapped in iris_ops.entry.run_main)
have already said what went wrong in one line. Here:
- a worker failed: exit with the first failed worker's exit code (2 for bad input, 128 + N for signal N),
  and, unless it was a refusal (2) or an interruption (130), one line naming that rank and its code;
- the launcher was interrupted or terminated: exit 128 + the signal, no line (the workers said it);
- torchrun's own log lines at warning level (its OMP_NUM_THREADS banner, "sending closing signal")
  are not printed; its errors are. The workers' C++ warnings (c10d socket time-outs, printed before
  the project's own line) are off unless TORCH_CPP_LOG_LEVEL is set.
"""

from __future__ import annotations

import logging
import os
import sys

PROG = "iris_ops.torchrun"
_QUIET_LOGGERS = ("torch.distributed.run", "torch.distributed.elastic", "torch.distributed.launcher")


def exit_code_of(exitcode: int) -> int:
    """A shell's exit code for a worker's: a signal's negative code -> 128 + the signal."""
    return 128 - exitcode if exitcode < 0 else exitcode


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    # torch's elastic loggers each get a level of their own when made (LOGLEVEL), so set each one.
    for name in list(logging.Logger.manager.loggerDict):
        if name.startswith(_QUIET_LOGGERS):
            logging.getLogger(name).setLevel(logging.ERROR)
    # Its "failed (exitcode: N)" error: the workers said what failed, and the first one's code is returned.
    logging.getLogger("torch.distributed.elastic.multiprocessing.api").setLevel(logging.CRITICAL)
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        run(args)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        code = exit_code_of(failure.exitcode) or 1
        if code not in (2, 130):
            print(f"{PROG}: rank {rank} (pid {failure.pid}) exited with code {code}", file=sys.stderr, flush=True)
        return code
    except SignalException as exc:
        return 128 + int(exc.sigval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
