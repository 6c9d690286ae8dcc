"""The packages form layers and imports point down only (every import in the source, function-level ones
included): iris_ops (the PGAS layer) <- stream_k (the GEMM) <- overlap (the op and its communication) <-
harness (what the benchmark needs) <- reference, benchmark.py. A cycle between packages is an upward import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["iris_ops", "stream_k", "overlap", "harness", "reference"]
RANK = {name: i for i, name in enumerate(LAYERS)}


def imported_packages(path: Path) -> set[str]:
    """Top-level project packages that `path` imports anywhere in its source."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(name.split(".")[0] for name in names if name.split(".")[0] in RANK)
    return found


def package_edges() -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> the files that import it."""
    edges: dict[str, dict[str, list[str]]] = {name: {} for name in LAYERS}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            for target in imported_packages(path) - {package}:
                edges[package].setdefault(target, []).append(str(path.relative_to(ROOT)))
    return edges


@pytest.mark.parametrize("package", LAYERS)
def test_imports_point_down(package: str) -> None:
    upward = {target: files for target, files in package_edges()[package].items() if RANK[target] > RANK[package]}
    assert not upward, f"{package} imports from a layer above it: {upward}"


def test_no_cycle_between_packages() -> None:
    edges = {package: set(targets) for package, targets in package_edges().items()}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in edges[node]:
            assert state.get(target) != 1, f"import cycle: {' -> '.join([*path, node, target])}"
            if target not in state:
                visit(target, [*path, node])
        state[node] = 2

    for package in LAYERS:
        if package not in state:
            visit(package, [])


def test_walker_sees_function_level_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import os\n\ndef f():\n    from harness.config import x\n    import stream_k.plan\n")
    assert imported_packages(source) == {"harness", "stream_k"}
