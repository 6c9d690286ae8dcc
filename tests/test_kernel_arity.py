"""No @triton.jit function of the library takes more than MAX_PARAMETERS parameters: a kernel's arguments come in
groups (iris_ops.context.DeviceContext, stream_k.kernel_args, overlap.kernel_args), not as long flat lists."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("stream_k", "overlap", "iris_ops")
MAX_PARAMETERS = 20


def _is_jit(decorator: ast.expr) -> bool:
    """`@triton.jit`, `@triton.jit(...)`, `@jit`, `@jit(...)`."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Attribute):
        return target.attr == "jit"
    return isinstance(target, ast.Name) and target.id == "jit"


def jit_functions() -> list[tuple[str, str, int]]:
    """(file, function, parameters) of every @triton.jit function under PACKAGES."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.FunctionDef) and any(_is_jit(d) for d in node.decorator_list):
                    a = node.args
                    count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                    found.append((str(path.relative_to(ROOT)), node.name, count))
    return found


def test_jit_functions_are_found() -> None:
    names = {name for _, name, _ in jit_functions()}
    assert {"streamk_program", "streamk_gemm_kernel", "overlap_kernel", "comm_program"} <= names


def test_no_jit_function_above_the_limit() -> None:
    over = [f"{path}: {name} ({count})" for path, name, count in jit_functions() if count > MAX_PARAMETERS]
    assert not over, f"jit functions with more than {MAX_PARAMETERS} parameters: {over}"
