"""Run a script (or `-m module`) in this process and print its rank's exit code, so that a test under
mpirun can see what every rank exited with (mpirun reports only the first non-zero one).

    mpirun -np 2 python tests/mpi/exit_status.py benchmark.py -m abc
    mpirun -np 2 python tests/mpi/exit_status.py -m reference -m abc

Prints `EXIT_STATUS rank R code C` on stdout and, when EXIT_STATUS_DIR is set, into the file
EXIT_STATUS_DIR/rank<R> (mpirun stops forwarding a rank's output once it has begun to stop the job, so
the file is what shows the exit code of a rank that the launcher stopped), then exits with C.
"""

from __future__ import annotations

import os
import runpy
import sys


def main() -> int:
    args = sys.argv[1:]
    module = args[0] == "-m"
    target = args[1] if module else args[0]
    sys.argv = [target, *args[2 if module else 1 :]]
    code: object = 0
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    code = 0 if code is None else code if isinstance(code, int) else 1
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0"))
    line = f"EXIT_STATUS rank {rank} code {code}"
    if os.environ.get("EXIT_STATUS_DIR"):
        with open(os.path.join(os.environ["EXIT_STATUS_DIR"], f"rank{rank}"), "w") as f:
            f.write(line + "\n")
    print(line, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
