"""The bound launcher's argument flattening (stream_k.launch.flatten_args), on the CPU: what the compiled launcher
of Triton 3.6 parses. Tensors become device addresses, top-level tensor descriptors expand, a tuple argument stays
a (nested) tuple with its tensors resolved and its constexpr elements as they are."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import triton.language as tl

from streamk_pgas.stream_k.launch import flatten_args


class Group(NamedTuple):
    X: Any
    n: Any
    FLAG: Any


def fake_desc(value: Any, meta: Any) -> list[Any]:
    return ["desc", value, meta]


def test_tuples_nested_tensors_resolved_constexprs_kept() -> None:
    x, y = torch.zeros(4), torch.zeros(8)
    flag = tl.constexpr(True)
    names = ["A", "G", "OPT", "D", "k", "FN"]
    signature = ["*fp32", Group("*fp32", "i32", "constexpr"), "constexpr", "tensordesc<fp32[4]>", "i32", "constexpr"]
    args = {"A": x, "G": Group(y, 7, flag), "OPT": None, "D": "descriptor", "k": 3, "FN": fake_desc}
    flat = flatten_args(names, signature, args, ["meta0"], fake_desc)
    assert flat == [x.data_ptr(), (y.data_ptr(), 7, flag), None, "desc", "descriptor", "meta0", 3, fake_desc]
    assert type(flat[1]) is tuple  # the launcher's "(...)" format takes any sequence; a plain tuple it is


def test_nested_tuple_inside_tuple() -> None:
    x = torch.zeros(2)
    flat = flatten_args(["T"], [("*fp32", ("i32", "*fp32"))], {"T": (x, (5, x))}, [], fake_desc)
    assert flat == [(x.data_ptr(), (5, x.data_ptr()))]
