"""The packages form layers and imports point down only (every import in the source, function-level ones
included): the namespace root (streamk_pgas itself and streamk_pgas.namespace: how the packages answer to their names)
<- spec (the problem spec) <- iris_ops (the PGAS layer) <- stream_k (the GEMM) <- overlap (the op and its
communication) <- harness (what the benchmark needs) <- reference <- tools, results <- the command line (streamk_pgas's
other modules: cli, bench, launch, versions). Every package is streamk_pgas.<folder>, and every import names it so
(`test_imports_go_through_the_namespace`). A cycle between packages is an upward import; inside a package no module
imports, directly or through others, one that imports it back (`test_no_import_cycle_between_modules`). spec imports
neither torch nor Triton."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "streamk_pgas"
# the layers' folders, bottom to top, each the package streamk_pgas.<folder>
FOLDERS = ["spec", "iris_ops", "stream_k", "overlap", "harness", "reference", "tools", "results"]
ROOT_LAYER, CLI_LAYER = "namespace", "cli"  # streamk_pgas/: its root (bottom) and its command line (top)
LAYERS = [ROOT_LAYER, *FOLDERS, CLI_LAYER]
RANK = {name: i for i, name in enumerate(LAYERS)}
# Files that import the Iris drop-in by its own top-level name, as an Iris program does: the tests of that name.
DROP_IN = {"tests/test_iris_host_api.py", "tests/mpi/iris_host_api.py", "tests/mpi/iris_style_atomic_add.py"}


def layer_of(module: str) -> str | None:
    """The layer of a dotted module name under the namespace (None for any other module)."""
    parts = module.split(".")
    if parts[0] != NAMESPACE:
        return None
    if len(parts) == 1 or parts[1] == ROOT_LAYER:
        return ROOT_LAYER
    return parts[1] if parts[1] in FOLDERS else CLI_LAYER


def import_names(path: Path) -> list[tuple[str, int]]:
    """(the dotted name, relative level) of everything `path` imports anywhere in its source: `import a.b` gives a.b,
    `from a.b import c` gives a.b.c (a module or a name in one: its layer is the same)."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            found += [(f"{base}.{alias.name}" if base else alias.name, node.level) for alias in node.names]
    return found


def imported_layers(path: Path) -> set[str]:
    """The layers that `path` imports from anywhere in its source."""
    return {layer for name, level in import_names(path) if not level and (layer := layer_of(name)) is not None}


def layer_files() -> dict[str, list[Path]]:
    """Each layer's source files: the folders', and streamk_pgas/'s, split into its root and its command line."""
    files: dict[str, list[Path]] = {name: [] for name in LAYERS}
    for folder in FOLDERS:
        files[folder] = sorted((ROOT / folder).rglob("*.py"))
    for path in sorted((ROOT / NAMESPACE).rglob("*.py")):
        is_root = path.name in ("__init__.py", f"{ROOT_LAYER}.py") or path.parent.name == "toplevel"
        files[ROOT_LAYER if is_root else CLI_LAYER].append(path)
    return files


def package_edges() -> dict[str, dict[str, list[str]]]:
    """layer -> imported layer -> the files that import it."""
    edges: dict[str, dict[str, list[str]]] = {name: {} for name in LAYERS}
    for layer, paths in layer_files().items():
        for path in paths:
            for target in imported_layers(path) - {layer}:
                edges[layer].setdefault(target, []).append(str(path.relative_to(ROOT)))
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
    source.write_text("import os\n\ndef f():\n    from streamk_pgas.harness.config import x\n"
                      "    import streamk_pgas.stream_k.plan\n    from streamk_pgas import spec, cli\n"
                      "    from streamk_pgas.namespace import lazy_attributes\n")
    assert imported_layers(source) == {"harness", "stream_k", "spec", CLI_LAYER, ROOT_LAYER}


def project_sources() -> list[Path]:
    """Every Python file of the project: the packages, streamk_pgas/, tests, examples and the scripts at the top (not
    the scripts kept beside a log in results/logs: data, as they ran then)."""
    folders = [*FOLDERS, NAMESPACE, "tests", "examples"]
    paths = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))
             if not p.is_relative_to(ROOT / "results" / "logs")]
    return [*paths, *sorted(ROOT.glob("*.py"))]


def test_imports_go_through_the_namespace() -> None:
    """Every import of a project package names it under streamk_pgas (`from streamk_pgas.overlap import OverlapOp`,
    `from streamk_pgas import spec`), absolute, so that no module is ever loaded by its folder's name as well: the only
    top-level names are the ones a user types (`python -m reference`, `import iris_ops`, which become the namespaced
    packages: streamk_pgas.namespace). The Iris drop-in's tests import `iris_ops` as an Iris program would."""
    bad = []
    for path in project_sources():
        rel = str(path.relative_to(ROOT))
        for name, level in import_names(path):
            top = name.split(".")[0]
            if level:
                bad.append(f"{rel}: relative import {'.' * level}{name}")
            elif top in FOLDERS and not (top == "iris_ops" and rel in DROP_IN):
                bad.append(f"{rel}: {name}")
    assert not bad, bad


def test_the_drop_in_files_use_its_name() -> None:
    """The exceptions above are still what they say: each imports `iris_ops` by the drop-in's name."""
    for rel in DROP_IN:
        assert ("iris_ops", 0) in import_names(ROOT / rel), rel


def test_spec_is_the_bottom_and_needs_no_torch() -> None:
    """spec imports no project package but itself and the namespace root, and neither torch nor Triton (only the
    standard library)."""
    for path in sorted((ROOT / "spec").rglob("*.py")):
        for name, _ in import_names(path):
            top = name.split(".")[0]
            assert layer_of(name) in ("spec", ROOT_LAYER) or top in ("__future__", "dataclasses", "typing"), \
                f"{path.name} imports {name}"


def test_reference_baselines_do_not_load_the_triton_stack() -> None:
    """The vendor baselines (reference/) run with torch alone: importing them loads no Triton or overlap, of
    stream_k only its datatype map (stream_k.dtypes), and of iris_ops only what ends a run and starts a world (its
    errors, variables, bootstrap, entry)."""
    import subprocess
    import sys

    light = tuple(f"streamk_pgas.{m}" for m in ("iris_ops", "iris_ops.errors", "iris_ops.env", "iris_ops.bootstrap",
                                                 "iris_ops.entry", "stream_k", "stream_k.dtypes"))
    code = ("import sys; import streamk_pgas.reference.cli, streamk_pgas.reference.variants, "
            "streamk_pgas.reference.runner, streamk_pgas.reference.world; "
            "print(sorted(m for m in sys.modules if (m.split('.')[0] == 'triton' or m.split('.')[:2] in "
            "(['streamk_pgas', 'stream_k'], ['streamk_pgas', 'overlap'], ['streamk_pgas', 'iris_ops'])) "
            f"and m not in {light!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]", out


def test_flag_checks_load_neither_torch_nor_triton() -> None:
    """harness.checks (the flags' ranges, output paths, the one ConfigError) stays fast to import."""
    import subprocess
    import sys

    code = ("import sys; import streamk_pgas.harness.checks; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]", out


# ---- no import cycle between modules ----------------------------------------------------------------------------

def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every source file of the layers' packages under `root`, each under the
    namespace: <root>/spec/x.py is streamk_pgas.spec.x, <root>/streamk_pgas/cli.py streamk_pgas.cli (a package's
    __init__.py is the package's own name)."""
    out: dict[str, Path] = {}
    for folder in (*FOLDERS, NAMESPACE):
        for path in sorted((root / folder).rglob("*.py")) if (root / folder).is_dir() else []:
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts if folder == NAMESPACE else [NAMESPACE, *parts])] = path
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
                                           "    from streamk_pgas.overlap.config import Config\n")
    (pkg / "config.py").write_text("def f():\n    from streamk_pgas.overlap.modes import Base\n")
    assert module_cycle(tmp_path) == ["streamk_pgas.overlap.config", "streamk_pgas.overlap.modes",
                                      "streamk_pgas.overlap.modes.base", "streamk_pgas.overlap.config"]
    (pkg / "config.py").write_text("import os\n")
    assert module_cycle(tmp_path) is None


def test_logs_are_data() -> None:
    """results/logs holds the data of real runs (and, beside a log, the script that made it, as data): no module of
    the project imports from it, and no test, script or CI step runs a file under it."""
    import re

    pattern = re.compile(r"(from|import)\s+(streamk_pgas\.)?results\.logs\b|results/logs/[\w./*{}-]*\.(py|sh)\b")
    sources = [p for package in (*FOLDERS, NAMESPACE, "tests", "scripts", ".ci") if (ROOT / package).is_dir()
               for p in (ROOT / package).rglob("*") if p.is_file() and p.suffix in ("", ".py", ".sh")]
    sources += [ROOT / "run.sh", ROOT / "benchmark.py"]
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in sources
            if not p.is_relative_to(ROOT / "results" / "logs") and p != Path(__file__).resolve()
            for m in pattern.finditer(p.read_text(errors="replace"))]
    assert not hits, hits
