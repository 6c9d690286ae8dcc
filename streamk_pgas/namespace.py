"""How the project's packages answer to their names: the one place for the rules every package's __init__ follows.

Every module lives under `streamk_pgas`: streamk_pgas.spec is the folder spec/, streamk_pgas.iris_ops is iris_ops/,
and so on (installed, setup.py maps the folders into the package; in a checkout, streamk_pgas.__path__ takes in the
checkout's root). Two rules here:

- alias_toplevel: a package imported by its folder's own name (`import iris_ops`, `python -m reference`, `python -m
  tools.X` from a checkout; the installed top-level `iris_ops`, the Iris drop-in's name) is the namespaced package
  itself, and its submodules (`iris_ops.bootstrap`) are the namespaced ones: one module object under two names,
  never a second copy with state of its own (a heap registry, a bootstrap, error words).
- lazy_attributes: a package's names loaded from its submodules when first used (PEP 562), so that importing the
  package loads nothing heavy (torch, Triton) that the caller does not use.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Mapping
from types import CodeType, ModuleType
from typing import Any

NAMESPACE = "streamk_pgas"


class _AliasLoader(importlib.abc.Loader):
    """Loads `X.sub` as the module streamk_pgas.X.sub itself (imported once, under its own name)."""

    def __init__(self, target: str, target_spec: importlib.machinery.ModuleSpec) -> None:
        self.target, self.target_spec = target, target_spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.target_spec = module.__spec__ or self.target_spec
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system gave the module the alias's spec (and touched nothing else of it): it keeps its own
        module.__spec__ = self.target_spec

    def get_code(self, fullname: str) -> CodeType | None:
        """The module's code, for runpy: `python -m iris_ops.torchrun` runs streamk_pgas.iris_ops.torchrun as
        __main__, as `python -m` does with any module."""
        loader = self.target_spec.loader
        return loader.get_code(self.target) if isinstance(loader, importlib.abc.InspectLoader) else None


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the submodules of the packages that answer to a top-level name (prefixes: the name -> the package)."""

    def __init__(self) -> None:
        self.prefixes: dict[str, str] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        top, dot, rest = fullname.partition(".")
        package = self.prefixes.get(top)
        if package is None or not dot:
            return None
        real = f"{package}.{rest}"
        real_spec = importlib.util.find_spec(real)
        if real_spec is None:
            return None
        is_package = real_spec.submodule_search_locations is not None
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(real, real_spec), origin=real_spec.origin,
                                              is_package=is_package)
        spec.has_location = real_spec.has_location
        if is_package:
            spec.submodule_search_locations = list(real_spec.submodule_search_locations or [])
        return spec


_FINDER = _AliasFinder()


def alias_toplevel(name: str) -> None:
    """Called by a package of the namespace that finds itself imported by its folder's name `name` (not under
    streamk_pgas): from now on that name and its submodules are the namespaced package's modules."""
    if name.startswith(f"{NAMESPACE}."):
        return
    package = importlib.import_module(f"{NAMESPACE}.{name}")
    sys.modules[name] = package  # what the import of `name` returns: the import system reads sys.modules at its end
    _FINDER.prefixes[name] = package.__name__
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)  # ahead of the path finder, which would load the folder's files again


def lazy_attributes(package: str, sources: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module-level __getattr__ and __dir__ (PEP 562) for `sources`, name -> the module that defines it
    (relative to the package: "device" for package.device). A name is imported on first use and kept in the
    package's globals; any other name is an AttributeError."""
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{source}"), name)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(sources))

    return __getattr__, __dir__
