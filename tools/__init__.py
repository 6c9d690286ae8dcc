"""Command-line tools that are not the product's entry (`python -m tools.NAME`): the compile check for GPU targets,
and the checks and micro-benchmarks an issue's acceptance runs on a GPU, each with a CPU variant its test runs in
Triton's interpreter."""

if __name__ == "tools":  # imported by its folder's name, from a checkout: be streamk_pgas.tools itself
    from streamk_pgas.namespace import alias_toplevel

    alias_toplevel(__name__)
