"""The packages form layers and imports point down only (every import in the source, function-level ones
included): spec (the problem spec) <- iris_ops (the PGAS layer) <- stream_k (the GEMM) <- overlap (the op and
its communication) <- harness (what the benchmark needs) <- reference <- tools, results <- streamk_pgas (the command
line: the benchmark, benchmark.py's code). A cycle
between packages is an upward import; inside a package no module imports, directly or through others, one that
imports it back (`test_no_import_cycle_between_modules`). spec imports neither torch nor Triton."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["spec", "iris_ops", "stream_k", "overlap", "harness", "reference", "tools", "results", "streamk_pgas"]
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
        for path in sorted((ROOT / package).rglob("*.py")) if (ROOT / package).is_dir() else []:
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


def test_spec_is_the_bottom_and_needs_no_torch() -> None:
    """spec imports no project package and neither torch nor Triton (only the standard library)."""
    for path in sorted((ROOT / "spec").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                     else [])
            for name in names:
                top = name.split(".")[0]
                assert top in ("spec", "__future__", "dataclasses", "typing"), f"{path.name} imports {name}"


def test_reference_baselines_do_not_load_the_triton_stack() -> None:
    """The vendor baselines (reference/) run with torch alone: importing them loads no Triton or overlap, of
    stream_k only its datatype map (stream_k.dtypes), and of iris_ops only what ends a run and starts a world (its
    errors, variables, bootstrap, entry)."""
    import subprocess
    import sys

    light = ("iris_ops", "iris_ops.errors", "iris_ops.env", "iris_ops.bootstrap", "iris_ops.entry", "stream_k",
             "stream_k.dtypes")
    code = ("import sys; import reference.cli, reference.variants, reference.runner, reference.world; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('triton', 'stream_k', 'overlap', 'iris_ops') "
            f"and m not in {light!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]", out


def test_flag_checks_load_neither_torch_nor_triton() -> None:
    """harness.checks (the flags' ranges, output paths, the one ConfigError) stays fast to import."""
    import subprocess
    import sys

    code = ("import sys; import harness.checks; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]", out


# ---- no import cycle between modules ----------------------------------------------------------------------------

def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every source file of the layers' packages under `root` (a package's
    __init__.py is the package's own name)."""
    out: dict[str, Path] = {}
    for package in LAYERS:
        for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else []:
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that module `name` (its file `path`) imports anywhere in its source: module level,
    inside functions and under TYPE_CHECKING alike. `from a.b import c` names the module a.b.c where there is one,
    else a.b; an import names that module, not the packages above it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {m for m in found if m in modules and m != name}


def module_cycle(root: Path) -> list[str] | None:
    """One import cycle between the modules under `root` (the names, the first repeated at the end), or None."""
    modules = module_names(root)
    edges = {name: sorted(imported_modules(name, path, modules)) for name, path in modules.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in edges[node]:
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        path.pop()
        return None

    for name in modules:
        if name not in state and (found := visit(name)):
            return found
    return None


def test_no_import_cycle_between_modules() -> None:
    """No module of any package imports, directly or through others, a module that imports it back (function-level
    and TYPE_CHECKING imports count: a cycle hidden by deferring an import is still a cycle)."""
    cycle = module_cycle(ROOT)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_cycle_walker_sees_deferred_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "overlap"
    (pkg / "modes").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "modes" / "__init__.py").write_text("from .base import Base\n")
    (pkg / "modes" / "base.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                           "    from overlap.config import Config\n")
    (pkg / "config.py").write_text("def f():\n    from overlap.modes import Base\n")
    assert module_cycle(tmp_path) == ["overlap.config", "overlap.modes", "overlap.modes.base", "overlap.config"]
    (pkg / "config.py").write_text("import os\n")
    assert module_cycle(tmp_path) is None


def test_logs_are_data() -> None:
    """results/logs holds the data of real runs (and, beside a log, the script that made it, as data): no module of
    the project imports from it, and no test, script or CI step runs a file under it."""
    import re

    pattern = re.compile(r"(from|import)\s+results\.logs\b|results/logs/[\w./*{}-]*\.(py|sh)\b")
    sources = [p for package in (*LAYERS, "tests", "scripts", ".ci") if (ROOT / package).is_dir()
               for p in (ROOT / package).rglob("*") if p.is_file() and p.suffix in ("", ".py", ".sh")]
    sources += [ROOT / "run.sh", ROOT / "benchmark.py"]
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sources
            if not p.is_relative_to(ROOT / "results" / "logs") and p != Path(__file__).resolve()
            for m in pattern.finditer(p.read_text(errors="replace"))]
    assert not hits, hits
