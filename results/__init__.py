"""Reading the run logs: plot.py (figures, tables), sweep.py (grids of runs), grid_table.py."""
