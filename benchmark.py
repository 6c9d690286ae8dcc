#!/usr/bin/env python3
"""The seed's entry of the benchmark (streamk_pgas.bench; `streamk-pgas bench` after `pip install .` is the same):

    mpirun -np 2 python benchmark.py --algorithm one_shot --mode fused --validate --benchmark
"""

from __future__ import annotations

import sys

from streamk_pgas.bench import entry


def main(argv: list[str] | None = None) -> int:
    return entry(argv, "benchmark.py")


if __name__ == "__main__":
    sys.exit(main())
