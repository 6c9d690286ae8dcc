"""streamk-pgas's command line: `streamk-pgas COMMAND` (installed by `pip install .`), `python -m streamk_pgas`.

    cli      the commands: quickstart, bench, reference, plot
    bench    the benchmark (the seed's benchmark.py runs the same)
"""
