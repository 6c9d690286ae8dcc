"""Datatype names, their element sizes, what C holds and what the GEMM accumulates in for each (torch's dtypes
are mapped above, in stream_k.dtypes, by the `*_torch_name` fields)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DataType:
    name: str  # as on the command line: "bf16", "fp16", "fp32", "int8"
    torch_name: str  # the torch dtype's attribute name ("bfloat16")
    bytes: int  # of one input element
    output: str  # C's datatype name: int8 products accumulate and are stored as int32; floats keep their type
    output_torch_name: str
    output_bytes: int
    exact: bool = False  # integer products: validation asks for exact equality
    accumulator_torch_name: str = "float32"  # what the GEMM sums products in (and split tiles' partial sums hold)


DATATYPES: dict[str, DataType] = {
    "fp16": DataType("fp16", "float16", 2, "fp16", "float16", 2),
    "bf16": DataType("bf16", "bfloat16", 2, "bf16", "bfloat16", 2),
    "fp32": DataType("fp32", "float32", 4, "fp32", "float32", 4),
    "int8": DataType("int8", "int8", 1, "int32", "int32", 4, exact=True, accumulator_torch_name="int32"),
}


def datatype(name: str) -> DataType:
    """The record of a datatype name; ValueError naming the valid ones."""
    if name not in DATATYPES:
        raise ValueError(f"datatype must be one of {', '.join(DATATYPES)}; got {name!r}")
    return DATATYPES[name]
