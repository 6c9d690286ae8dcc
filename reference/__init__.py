"""Vendor-library baselines of the distributed GEMMs, logged in benchmark.py's JSON schema.

    mpirun -np 2 python -m reference --collective all_reduce -m 8192 -n 8192 -k 8192 --validate
    ./run.sh -n 2 -c all            # picks mpirun or torchrun

config: flags and checks (no torch) | world: process groups | inputs: data, GEMM call, validation
variants: the baselines | runner: timing and records | cli: the entry point
"""

if __name__ == "reference":  # imported by its folder's name, from a checkout: be streamk_pgas.reference itself
    from streamk_pgas.namespace import alias_toplevel

    alias_toplevel(__name__)
