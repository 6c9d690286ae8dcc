"""pyproject.toml states the torch and Triton versions the project is tested on, and this run is inside them."""

from __future__ import annotations

import re
from pathlib import Path

from streamk_pgas import versions

PYPROJECT = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()


def test_pyproject_bounds_torch_and_triton_on_both_sides() -> None:
    for package in ("torch", "triton"):
        (spec,) = re.findall(rf'^\s*"{package}(>=[^"]+)",', PYPROJECT, re.M)
        assert re.fullmatch(r">=[\d.]+,<[\d.]+", spec), spec
        assert versions.tested_range(package) == spec  # the installed metadata says the same


def test_this_run_is_inside_the_tested_range() -> None:
    assert all(inside for *_, inside in versions.report()), versions.report()


def test_versions_compare_by_release() -> None:
    assert versions.satisfies("2.13.0+cpu", ">=2.11,<2.14") and versions.satisfies("2.11.0", ">=2.11,<2.14")
    assert not versions.satisfies("2.14.0", ">=2.11,<2.14") and not versions.satisfies("2.10.1", ">=2.11,<2.14")
    assert versions.satisfies("3.6.0", ">=3.6,<3.10") and not versions.satisfies("3.10.0", ">=3.6,<3.10")
