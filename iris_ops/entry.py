"""How a command-line entry of a multi-rank program ends: one line per failure and a known exit code, the
same under mpirun, torchrun and plain python.

    def main() -> int: ...                     # the entry's work; returns its exit code
    if __name__ == "__main__":
        sys.exit(run_main(main, "benchmark.py"))

What run_main does with what main raises:
- ConfigError, HeapReserveError (a bad flag or variable, a heap that cannot be had: found alike on every
  rank, before any work): rank 0 prints `prog: error: <line>`, every rank exits 2. Once the ranks have
  started talking, they meet (a bounded barrier) after rank 0 has printed; before that, the other ranks
  wait (at most ENTRY_WAIT_S) for the launcher to stop them once rank 0 has exited, so that rank 0's line
  is printed before the launcher stops the job.
- KeyboardInterrupt (Ctrl-C): `prog: rank R: interrupted` and exit 130 on each rank that got it; the
  shm heap's file is removed; no traceback.
- Any other exception (a wait that gave up, a peer that died or never arrived, a kernel error):
  `prog: rank R: <Type>: <first line>`, exit 1; under MPI with more than one rank the job is aborted
  so that no peer waits for this one.
SystemExit passes through unchanged.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable

from streamk_pgas.iris_ops.bootstrap import launcher_rank, launcher_world_size, run_cleanups, started
from streamk_pgas.iris_ops.errors import ConfigError, HeapReserveError

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process ended by Ctrl-C
ENTRY_WAIT_S = 15.0  # how long a rank other than 0 waits for the launcher after a refusal found before start-up


def _say(line: str) -> None:
    """One line on stderr in one write, so that ranks sharing a pipe do not interleave within it."""
    sys.stdout.flush()
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message` (the type alone for an empty message)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def wait_for_launcher(code: int, wait_s: float = ENTRY_WAIT_S) -> int:
    """`code`, after waiting at most wait_s for the launcher to stop this process (its SIGTERM ends the wait
    with the same code): a rank other than 0 that exited at once with a refusal would make the launcher
    stop the job, rank 0 included, before rank 0 had printed its line."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(code)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave at once
        return code
    try:
        time.sleep(wait_s)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return code


def _refuse(prog: str, exc: BaseException) -> int:
    boot = started()
    rank = boot.rank if boot is not None else launcher_rank()
    world = boot.world_size if boot is not None else launcher_world_size()
    if rank == 0:
        _say(f"{prog}: error: {exc}")
    if world <= 1:
        return EXIT_BAD_INPUT
    if boot is not None:
        try:
            boot.barrier()  # every rank leaves once rank 0 has printed
        except Exception:  # a rank that did not refuse: the launcher ends the job on the exit code anyway
            pass
        return EXIT_BAD_INPUT
    return EXIT_BAD_INPUT if rank == 0 else wait_for_launcher(EXIT_BAD_INPUT)


def run_main(main: Callable[[], int | None], prog: str,
             refusals: tuple[type[BaseException], ...] = ()) -> int:
    """Run `main` and return the exit code for sys.exit, turning failures into one line each (see the module).
    `refusals`: more exception types to treat as ConfigError is treated (a layer's own bad-input error)."""
    try:
        code = main()
        return 0 if code is None else int(code)
    except (ConfigError, HeapReserveError, *refusals) as exc:
        return _refuse(prog, exc)
    except KeyboardInterrupt:
        boot = started()
        _say(f"{prog}: rank {boot.rank if boot is not None else launcher_rank()}: interrupted")
        run_cleanups()
        return EXIT_INTERRUPTED
    except Exception as exc:
        boot = started()
        rank = boot.rank if boot is not None else launcher_rank()
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        text = text.removeprefix(f"rank {rank}: ")  # the bootstrap's messages name the rank already
        _say(f"{prog}: rank {rank}: {type(exc).__name__}" + (f": {text}" if text else ""))
        if boot is not None and boot.world_size > 1 and boot.launcher == "mpi":
            boot.abort(EXIT_FAILED)  # runs the cleanups; the peers would otherwise wait in their next collective
        run_cleanups()
        return EXIT_FAILED
