"""The torch and Triton this runs with, against the range the project is tested on (pyproject.toml's dependencies,
read from the installed package's metadata):

    python -m streamk_pgas.versions     # one line per package; exit 1 if one is outside its tested range

CI prints it (scripts/test.sh) so that its log says which versions it ran.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys

PACKAGES = ("torch", "triton")
DIST = "streamk-pgas"


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string ('2.13.0+cpu' -> (2, 13, 0); '3.9.0rc1' -> (3, 9, 0))."""
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0].split("rc")[0].split("a")[0])[:3])


def tested_range(package: str) -> str:
    """The specifier of `package` in the installed streamk-pgas's requirements ('>=2.11,<2.14'), or ''."""
    for req in importlib.metadata.requires(DIST) or []:
        name, spec = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*([^;]*)", req).groups()  # type: ignore[union-attr]
        if name.lower() == package and ";" not in req:
            clauses = sorted(filter(None, spec.replace(" ", "").split(",")), key=lambda c: not c.startswith(">"))
            return ",".join(clauses)  # lower bound first
    return ""


def satisfies(version: str, spec: str) -> bool:
    """Whether `version` meets every `>=`, `>`, `<=`, `<`, `==` clause of `spec` (release numbers compared)."""
    have = release(version)
    for clause in filter(None, spec.split(",")):
        op, want = re.match(r"(>=|<=|==|>|<)(.+)", clause).groups()  # type: ignore[union-attr]
        bound = release(want)
        width = max(len(have), len(bound))
        a, b = have + (0,) * (width - len(have)), bound + (0,) * (width - len(bound))
        if not {">=": a >= b, "<=": a <= b, "==": a == b, ">": a > b, "<": a < b}[op]:
            return False
    return True


def report() -> list[tuple[str, str, str, bool]]:
    """(package, installed version, tested range, inside it) for torch and Triton."""
    rows = []
    for package in PACKAGES:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        spec = tested_range(package)
        rows.append((package, version, spec, version != "not installed" and satisfies(version, spec)))
    return rows


def main() -> int:
    rows = report()
    for package, version, spec, inside in rows:
        verdict = "inside" if inside else "OUTSIDE"
        print(f"{package} {version} ({verdict} the tested range {spec or '?'})")
    return 0 if all(inside for *_, inside in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
