"""Command-line tools that are not the product's entry (`python -m tools.NAME`): the compile check for GPU targets,
and the checks and micro-benchmarks an issue's acceptance runs on a GPU, each with a CPU variant its test runs in
Triton's interpreter."""
