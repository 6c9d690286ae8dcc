"""Command-line tools that are not the product's entry (`python -m tools.NAME`): checks and micro-benchmarks the
acceptance of an issue runs on a GPU, each with a CPU variant its test runs in Triton's interpreter."""
