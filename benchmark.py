#!/usr/bin/env python3
"""The seed's entry of the benchmark (streamk_pgas.bench; `streamk-pgas bench` after `pip install .` is the same):

    mpirun -np 2 python benchmark.py --algorithm one_shot --mode fused --validate --benchmark
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from streamk_pgas.iris_ops.entry import run_main
    from streamk_pgas.launch import launch_bench

    argv = sys.argv[1:] if argv is None else argv
    # --nproc N, before torch is imported: a launch replaces this process, so a code that comes back is a refusal's
    # (run_main gives 0 where there is no --nproc)
    launched = run_main(lambda: launch_bench(argv, "benchmark.py"), "benchmark.py")
    if launched:
        return launched
    from streamk_pgas.bench import entry

    return entry(argv, "benchmark.py")


if __name__ == "__main__":
    sys.exit(main())
