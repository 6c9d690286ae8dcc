"""Reading the run logs: plot.py (figures, tables), sweep.py (grids of runs), grid_table.py (ours against the
peers), mode_table.py (the planner against the modes measured)."""

if __name__ == "results":  # imported by its folder's name, from a checkout: be streamk_pgas.results itself
    from streamk_pgas.namespace import alias_toplevel

    alias_toplevel(__name__)
