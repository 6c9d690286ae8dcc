"""Command-line tools that are not the product's entry point (compile checks for GPU targets, ...)."""
