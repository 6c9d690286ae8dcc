"""Run benchmark.py's main() on many command lines in one process (tests/test_bad_inputs.py): importing
torch and triton takes seconds, checking a command line milliseconds.

    python tests/inprocess_main.py < cases.json > results.json

stdin: a JSON list of {"argv": [...], "env": {...}}; stdout: a JSON list of {"code", "stdout", "stderr"}
in the same order. `code` is what `python benchmark.py ARGV` would exit with: main()'s return value, or
the code of a SystemExit it raised (an exception that escapes main() counts as 1, with its traceback).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def run_one(main: object, argv: list[str], env: dict[str, str]) -> dict[str, object]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)  # type: ignore[operator]
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:
                traceback.print_exc()
                code = 1
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main() -> int:
    cases = json.load(sys.stdin)
    import benchmark

    results = [run_one(benchmark.main, c["argv"], c.get("env", {})) for c in cases]
    json.dump(results, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
