"""In a checkout every folder is its package under streamk_pgas (streamk_pgas.spec is spec/), and a folder imported by
its own name (`import iris_ops`, `python -m reference`, `python -m tools.X`) is that same package: one module object
under two names, never a second copy with state of its own. The lazily loaded names of iris_ops and stream_k
(streamk_pgas.namespace.lazy_attributes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("spec", "iris_ops", "stream_k", "overlap", "harness", "reference", "results", "tools")


def run_python(code: str, cwd: Path = ROOT) -> str:
    """`code` in a fresh interpreter run from `cwd` with the checkout first on its path; its stdout."""
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout


# Appended to a program run from the checkout: the project files that sys.modules holds more than one module object
# of (the file was executed twice, under two names), with those names, as the last line of JSON.
TWICE = """
import collections, json, os, sys
root = os.path.realpath(os.getcwd())
by_file = collections.defaultdict(dict)
for name, module in list(sys.modules.items()):
    path = getattr(module, '__file__', None)
    real = os.path.realpath(path) if path else ''
    # the project's files only (a virtual environment inside the checkout holds other packages' extension modules)
    if name != '__main__' and real.startswith(root + os.sep) and 'site-packages' not in real.split(os.sep):
        by_file[os.path.relpath(real, root)].setdefault(id(module), []).append(name)
print(json.dumps({f: sorted(sum(objs.values(), [])) for f, objs in by_file.items() if len(objs) > 1}))
"""


def test_the_folders_are_the_namespaces_packages() -> None:
    out = run_python(f"""
        import importlib, json
        print(json.dumps({{f: importlib.import_module('streamk_pgas.' + f).__file__ for f in {FOLDERS!r}}}))
    """)
    assert json.loads(out) == {f: str(ROOT / f / "__init__.py") for f in FOLDERS}


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_folders_own_name_is_the_same_package(folder: str, tmp_path: Path) -> None:
    """`import <folder>` (the checkout on the path) gives streamk_pgas.<folder> itself, and its submodules the
    namespaced modules, whichever name is imported first."""
    out = run_python(f"""
        import importlib, pkgutil, sys
        first = importlib.import_module({folder!r})
        real = importlib.import_module('streamk_pgas.' + {folder!r})
        assert first is real and sys.modules[{folder!r}] is real, (first, real)
        assert real.__name__ == real.__spec__.name == 'streamk_pgas.' + {folder!r}
        subs = [m.name for m in pkgutil.iter_modules(real.__path__) if m.name != '__main__']
        for sub in subs[:3]:
            short = importlib.import_module({folder!r} + '.' + sub)
            assert short is importlib.import_module(real.__name__ + '.' + sub), sub
            assert short.__spec__.name == real.__name__ + '.' + sub, short.__spec__
        print(len(subs))
    """, cwd=tmp_path)
    assert int(out) > 0


def test_no_module_is_loaded_twice_by_the_entry_points() -> None:
    """The entry points and the documented imports, all in one process: every project file is executed once (a file
    under two names is one module object)."""
    out = run_python(textwrap.dedent("""
        import runpy, sys
        import benchmark
        import iris_ops
        from iris_ops.bootstrap import get_bootstrap
        from overlap import OverlapOp
        import streamk_pgas.bench, streamk_pgas.cli, streamk_pgas.launch
        from streamk_pgas import iris_ops as real
        from streamk_pgas.iris_ops.bootstrap import get_bootstrap as real_get_bootstrap
        from streamk_pgas.overlap import OverlapOp as RealOverlapOp
        assert iris_ops is real and get_bootstrap is real_get_bootstrap and OverlapOp is RealOverlapOp
        for module in ('reference', 'tools.compile_check', 'results.sweep', 'iris_ops.torchrun'):
            sys.argv = [module, '--help']
            try:
                runpy.run_module(module, run_name='__main__', alter_sys=True)
            except SystemExit:
                pass
    """) + TWICE)
    assert json.loads(out.splitlines()[-1]) == {}


def test_python_m_reference_runs_its_main_once() -> None:
    """`python -m reference` (how run.sh starts the baselines), first thing in a process, executes each of reference's
    files once, under streamk_pgas."""
    out = run_python(textwrap.dedent("""
        import runpy, sys
        sys.argv = ['reference', '--help']
        try:
            runpy.run_module('reference', run_name='__main__', alter_sys=True)
        except SystemExit:
            pass
    """) + TWICE)
    assert out.startswith("usage: python -m reference"), out[:500]
    assert json.loads(out.splitlines()[-1]) == {}


def test_lazy_names_load_on_first_use() -> None:
    out = run_python("""
        import sys
        from streamk_pgas import iris_ops, stream_k
        assert 'streamk_pgas.iris_ops.heap' not in sys.modules and 'streamk_pgas.stream_k.gemm' not in sys.modules
        assert 'iris' in dir(iris_ops) and 'StreamKGemm' in dir(stream_k) and 'CollectiveError' in iris_ops.__all__
        iris = iris_ops.iris
        assert iris is sys.modules['streamk_pgas.iris_ops.heap'].iris and vars(iris_ops)['iris'] is iris
        assert stream_k.StreamKGemm is sys.modules['streamk_pgas.stream_k.gemm'].StreamKGemm
        for package in (iris_ops, stream_k):
            try:
                package.no_such_name
            except AttributeError as e:
                print(e)
    """)
    assert out.splitlines() == ["module 'streamk_pgas.iris_ops' has no attribute 'no_such_name'",
                                "module 'streamk_pgas.stream_k' has no attribute 'no_such_name'"]
