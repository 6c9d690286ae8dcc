"""What the check scripts of tests/mpi (heap_api.py, iris_host_api.py) share: running a Checker's named checks on
this rank, and the summary rank 0 writes of every rank's results (one entry per check: ok on every rank, and the
errors, each naming its rank), which the tests read."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any


def run_checks(checker: Any, names: list[str], barrier: Callable[[], None], tb_limit: int,
               verbose: bool = False) -> dict[str, list[str]]:
    """Each check `checker.<name>()` in turn, the ranks meeting after each; its errors (checker.errors, or the
    traceback of what it raised) by name."""
    mine: dict[str, list[str]] = {}
    for name in names:
        checker.errors = []
        fn: Callable[[], None] = getattr(checker, name)
        if verbose:
            print(f"rank {checker.me}: {name}", flush=True)
        try:
            fn()
        except Exception:
            checker.errors.append(traceback.format_exc(limit=tb_limit))
        mine[name] = checker.errors
        barrier()
    return mine


def merge_checks(everyone: list[dict[str, list[str]]], names: list[str]) -> dict[str, dict[str, Any]]:
    """Every rank's run_checks results, rank r's at everyone[r]: per check, ok on every rank and the errors."""
    return {name: {"ok": all(not e[name] for e in everyone),
                   "errors": [f"rank {r}: {err}" for r, e in enumerate(everyone) for err in e[name]]}
            for name in names}
