"""Support code shared by benchmark.py and reference/: config, JSON run logs, timing, validation, traces."""

if __name__ == "harness":  # imported by its folder's name, from a checkout: be streamk_pgas.harness itself
    from streamk_pgas.namespace import alias_toplevel

    alias_toplevel(__name__)
