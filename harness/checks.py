"""What benchmark.py and reference/ check alike, kept free of torch so the flag checks stay fast:
an argparse that raises the error of a bad flag (iris_ops.errors.ConfigError) instead of printing its usage,
the ranges of sizes and counts, whether an output path can be written, and the validation tolerances."""

from __future__ import annotations

import argparse
import math
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from streamk_pgas.iris_ops.env import MAX_TIMEOUT_S  # a day: every wait gives up after at most this long
from streamk_pgas.iris_ops.errors import ConfigError  # the one error of a bad flag or variable: "flag: what is valid"

__all__ = ["MAX_TIMEOUT_S", "ConfigError"]


# The GEMM dimensions: the Triton kernels and cuBLAS / hipBLAS take them as 32-bit integers.
MAX_DIM = (1 << 31) - 1
# Elements of one matrix: benchmark.py's kernels index A, B and C with 32-bit offsets.
MAX_ELEMENTS = (1 << 31) - 1
MAX_ITERS = 1_000_000
MAX_SEED = (1 << 32) - 1


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a malformed or missing value raises ConfigError (one line naming the flag, turned
    into exit code 2 by the caller) instead of printing the usage block and exiting on every rank."""

    def error(self, message: str) -> None:  # type: ignore[override]
        if message.startswith("argument "):
            flag, _, rest = message[len("argument "):].partition(": ")
            raise ConfigError(flag, rest)
        if message.startswith("unrecognized arguments: "):
            raise ConfigError(message.split(": ", 1)[1].split()[0], "unknown flag (see --help)")
        named = re.search(r"(?<![\w-])(--?[A-Za-z][\w-]*)", message)  # e.g. "ambiguous option: --BLK could match"
        raise ConfigError(named.group(1) if named else "arguments", message)


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: an integer in [lo, hi]; the message says the range."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer in [{lo}, {hi}], got {text!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in [{lo}, {hi}], got {v}")
        return v

    parse.__name__ = "integer"  # argparse names the type in some messages
    return parse


def timeout_seconds(text: str) -> float:
    """argparse type: seconds in (0, MAX_TIMEOUT_S], finite (nan and inf are refused)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], "
                                         f"got {text!r}") from None
    if not (math.isfinite(v) and 0 < v <= MAX_TIMEOUT_S):
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {text!r}")
    return v


def check_output_path(flag: str, path: str | os.PathLike[str], directory: bool = False) -> None:
    """Raise ConfigError unless `path` (a file, or a folder with directory=True) can be written: it is a
    regular file or none, no part of it is a file, and the nearest folder that exists takes a new file
    (tried: permissions alone do not tell, e.g. for root on a read-only mount). Folders that do not exist
    yet are fine (the writer makes them). Nothing is left behind."""
    text = os.fspath(path)
    p = Path(text)
    if not text:
        raise ConfigError(flag, "is empty")
    if p.exists():
        if directory and not p.is_dir():
            raise ConfigError(flag, f"{text} exists and is not a folder")
        if not directory and p.is_dir():
            raise ConfigError(flag, f"{text} is a folder; give a file name")
        if not directory and not p.is_file():  # /dev/full, a pipe: a write would fail, or vanish, after the work
            raise ConfigError(flag, f"{text} is not a regular file; give a file name")
        if not directory and not os.access(p, os.W_OK):
            raise ConfigError(flag, f"{text} exists and is not writable")
    elif not directory and text.endswith(os.sep):
        raise ConfigError(flag, f"{text} names a folder; give a file name")
    folder = (p if directory else p.parent).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(flag, f"cannot write {text}: {folder} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write_check_", dir=folder)
    except OSError as exc:
        raise ConfigError(flag, f"cannot write {text}: no file can be made in {folder} ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)


# Relative Frobenius error ||C - C64|| / ||C64|| allowed against a float64 product of the same inputs,
# by input datatype (bf16 operands land between 1e-3 and 1e-2; fp16 keeps 11 bits of
# mantissa where bf16 keeps 8; fp32 without TF32 far under 1e-3; int8 accumulates exactly in int32).
TOLERANCE = {"bf16": 2e-2, "fp16": 1e-2, "fp32": 1e-4, "int8": 0.0}
