"""What `pip install .` installs (setup.py): the package streamk_pgas, with every package folder of the repository
mapped into it (every subpackage included), and one top-level module, iris_ops (the Iris drop-in's name): no generic
top-level name (spec, harness, results, reference, tools) that would collide with a user's own package. Installed,
run from an empty folder, the names resolve to the installed files and the drop-in's name is the namespaced package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "streamk_pgas"
NOT_INSTALLED = ("tools", "tests")  # folders with packages that run from a checkout only


def package_folders() -> list[Path]:
    """Every folder of the repository that is a package (has __init__.py, as its parents up to the top do), but
    those that are not installed."""
    tops = [d for d in sorted(ROOT.iterdir()) if (d / "__init__.py").is_file() and d.name not in NOT_INSTALLED]
    return [init.parent.relative_to(ROOT) for top in tops for init in sorted(top.rglob("__init__.py"))
            if all((p / "__init__.py").is_file() for p in init.parents if p.is_relative_to(top))]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the repository's sources (so the build writes nothing into the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for top in {rel.parts[0] for rel in package_folders()}:
        shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("__pycache__", "logs", "figures"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                           str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    (built,) = (tmp / "dist").glob("*.whl")
    return built


def test_the_wheel_claims_only_the_namespace_and_the_drop_in(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {NAMESPACE, "iris_ops.py"}, tops
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["iris_ops", NAMESPACE]


def test_every_package_folder_is_installed_whole(wheel: Path) -> None:
    """Each package folder's modules are in the wheel under streamk_pgas/ (a new subpackage cannot be left out), and
    nothing else is: no tools, tests or build leftovers."""
    names = set(zipfile.ZipFile(wheel).namelist())
    want = set()
    for rel in package_folders():
        inside = Path(*rel.parts[1:]) if rel.parts[0] == NAMESPACE else rel
        want |= {str(Path(NAMESPACE, inside, p.name)) for p in (ROOT / rel).glob("*.py")}
    assert len(want) > 50
    shipped = {n for n in names if n.startswith(f"{NAMESPACE}/")}
    assert want - shipped == set(), sorted(want - shipped)
    assert shipped - want == set(), sorted(shipped - want)


def test_installed_names_from_an_empty_folder(wheel: Path, tmp_path: Path) -> None:
    """Installed (the wheel into a folder of its own) and run from an empty folder: streamk_pgas and its packages are
    the installed files, `import iris_ops` is streamk_pgas.iris_ops and its submodules are the same objects, and the
    entries run (python -m streamk_pgas, python -m streamk_pgas.reference)."""
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile", "-q",
                           "--target", str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = sorted(p.name for p in site.iterdir() if p.name != "bin" and not p.name.endswith(".dist-info"))
    assert modules == ["iris_ops.py", NAMESPACE]  # bin: the console script, which --target puts beside them
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "TRITON_INTERPRET": "1"}
    code = textwrap.dedent(f"""
        import sys
        import iris_ops
        from iris_ops.bootstrap import get_bootstrap
        import streamk_pgas
        from streamk_pgas import iris_ops as real, spec
        from streamk_pgas.iris_ops import bootstrap
        from streamk_pgas.overlap import OverlapOp
        assert iris_ops is real and get_bootstrap is bootstrap.get_bootstrap, (iris_ops, real)
        assert sys.modules['iris_ops.bootstrap'] is bootstrap
        assert streamk_pgas.__path__ == [{str(site / NAMESPACE)!r}], streamk_pgas.__path__
        for module in (real, spec, bootstrap, sys.modules[OverlapOp.__module__]):
            assert module.__file__.startswith({str(site)!r}), module.__file__
        print('ok')
    """)
    for args in (["-c", code], ["-m", NAMESPACE, "--help"], ["-m", f"{NAMESPACE}.reference", "--help"]):
        run = subprocess.run([sys.executable, *args], cwd=empty, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"{args[:2]}: " + run.stdout[-2000:] + run.stderr[-3000:]
        assert run.stdout.startswith(("ok", "usage:")), run.stdout[:500]
