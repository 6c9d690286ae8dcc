"""What `pip install .` puts in site-packages: the package `streamk_pgas`, with the repository's product folders
mapped into it (spec/ -> streamk_pgas/spec, ...), and the one top-level module `iris_ops`, the Iris drop-in's name
for streamk_pgas.iris_ops. Every subpackage of those folders is found here, so a new one cannot be left out.
The rest of the configuration is in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_packages, setup

NAMESPACE = "streamk_pgas"
# The product's folders, each installed as streamk_pgas.<folder>. tools/ is not: it runs from a checkout only.
PRODUCT = ("spec", "iris_ops", "stream_k", "overlap", "harness", "reference", "results")
# The top-level alias modules (`import iris_ops`), from this folder of the repository.
TOPLEVEL = f"{NAMESPACE}/toplevel"

HERE = Path(__file__).resolve().parent


def package_dirs() -> dict[str, str]:
    """Every installed package -> its folder in the repository."""
    dirs = {NAMESPACE: NAMESPACE}
    for folder in (NAMESPACE, *PRODUCT):
        name = NAMESPACE if folder == NAMESPACE else f"{NAMESPACE}.{folder}"
        dirs[name] = folder
        for sub in find_packages(where=str(HERE / folder)):
            dirs[f"{name}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"
    return dirs


setup(
    packages=sorted(package_dirs()),
    package_dir={"": TOPLEVEL, **package_dirs()},
    py_modules=sorted(p.stem for p in (HERE / TOPLEVEL).glob("*.py")),
    include_package_data=False,  # the packages hold code only (the alias folder above would count as data)
    options={"egg_info": {"egg_base": "."}},  # not in the alias folder, which the "" mapping makes the default
)
