"""The matrix of device-API cases that tests/mpi/device_ops.py runs and tests/test_iris_device_ops.py checks.

Plain data (no torch, no triton), so pytest can parametrise over it at collection time.
A case id is "<op>-<dtype>".
"""

from __future__ import annotations

ALL = ("int32", "int64", "fp16", "bf16", "fp32")
INTS = ("int32", "int64")

# op -> dtypes it is tested with
OPS: dict[str, tuple[str, ...]] = {
    "translate": ALL,
    "load": ALL,
    "store": ALL,
    "get_argument_order": ("int32",),  # which rank's copy get() reads (a local probe, safe when wrong)
    "get": ALL,
    "put": ALL,
    "atomic_add": ALL,
    "atomic_sub": ALL,
    "atomic_add_concurrent": ALL,  # every rank adds onto the same words of every rank
    "atomic_cas": INTS,
    "atomic_xchg": (*INTS, "fp32"),
    "atomic_and": INTS,
    "atomic_or": INTS,
    "atomic_xor": INTS,
    "atomic_min": (*INTS, "fp32"),
    "atomic_max": (*INTS, "fp32"),
    "notify": ("int32",),
    "notify_add": ("int32",),
    "wait_push_handshake": ("int32",),  # remote store + remote notify, local wait
    "wait_pull_handshake": ("int32",),  # local store + local notify, remote wait + remote load
    "wait_timeout": ("int32",),
    "wait_local": ("int32",),
    "read_timer": ("int64",),
    "record_error": ("int32",),
}

CASES: list[str] = [f"{op}-{dt}" for op, dts in OPS.items() for dt in dts]

# Cases Triton's CPU interpreter cannot run, with the exact message it raises; the GPU run covers them.
INTERPRETER_GAPS: dict[str, str] = {
    "atomic_add-bf16": "Unsupported data type",
    "atomic_sub-bf16": "Unsupported data type",  # atomic_sub is an atomic_add of the negation
    "atomic_add_concurrent-bf16": "Unsupported data type",
    "atomic_xchg-fp32": "Unsupported data type",
    # The interpreter adds fp16 under a lock of its own process (triton/python/src/interpreter.cc,
    # atomic_fadd<triton_half>), so adds from several ranks onto one word can lose updates; fp32 and
    # the integer types use std::atomic and are atomic across processes.
    "atomic_add_concurrent-fp16": "not atomic across processes in the interpreter",
}
