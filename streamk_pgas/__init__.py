"""streamk-pgas: every module of the project is under this one name.

    .spec .iris_ops .stream_k .overlap .harness .reference .results
               the repository's folders spec/, iris_ops/, ... (the layers: README "Layout"); .tools is tools/, in a
               checkout only (not installed)
    cli        the command line `streamk-pgas COMMAND` (installed by `pip install .`), `python -m streamk_pgas`:
               quickstart, bench, reference, plot
    bench      the benchmark (the seed's benchmark.py runs the same)
    namespace  how the packages answer to their names: a folder's own name (`import iris_ops`), lazily loaded names
    toplevel/  the top-level module `iris_ops` that pip installs (the Iris drop-in's name)

Installed, setup.py maps each folder into this package: site-packages holds streamk_pgas/ and iris_ops.py. In a
checkout the folders stand beside this one and the checkout's root joins this package's path, so the same names
resolve to them.
"""

import os as _os

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_ROOT = _os.path.dirname(_HERE)
if not _os.path.isdir(_os.path.join(_HERE, "spec")) and _os.path.isfile(_os.path.join(_ROOT, "spec", "__init__.py")):
    __path__.append(_ROOT)  # a checkout: streamk_pgas.spec is <root>/spec (installed, it is streamk_pgas/spec)
