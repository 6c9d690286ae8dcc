"""Compile every kernel the project launches for GPU targets, on a machine with no GPU.

    python -m tools.compile_check [--targets gfx942,gfx950,sm90,sm100] [--groups gemm,op,device_api,timer,barrier]
                                  [--worlds 1,2,8] [--jobs N] [--json out/compile_check.json]
                                  [--cache DIR | --no_cache] [--list]

For each target (targets.py) it takes the launches the library makes (kernels.py: launch specs, argument values
and options as the code passes them; the op's are what the op, planned for the target, lists for every algorithm
x mode the target runs, the others reported as not built; groups gemm_variants and op_bench widen the default
matrix), specialises each as Triton's JIT would (build.py), compiles it with
`triton.compile` and reads registers, spills, shared memory / LDS and the occupancy that follows
(resources.py). It prints a table per target and writes the results as JSON (report.py); it exits 1, with one
line per failure, when a kernel does not compile, does not fit the target, or spills in a default
configuration. Launches that compile to the same kernel are built once, and results are cached under Triton's
own cache key.
"""
