"""What benchmark.py and reference/ check alike, kept free of torch so the flag checks stay fast:
the error a bad flag raises, and the validation tolerances."""

from __future__ import annotations


class ConfigError(ValueError):
    """A flag with a bad value: `flag` names it, the message says what is valid."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"{flag}: {message}")
        self.flag = flag


# Relative Frobenius error ||C - C64|| / ||C64|| allowed against a float64 product of the same inputs,
# by input datatype (bf16 operands land between 1e-3 and 1e-2; fp16 keeps 11 bits of
# mantissa where bf16 keeps 8; fp32 without TF32 far under 1e-3; int8 accumulates exactly in int32).
TOLERANCE = {"bf16": 2e-2, "fp16": 1e-2, "fp32": 1e-4, "int8": 0.0}
