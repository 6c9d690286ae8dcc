"""Redraw the checked-in bar charts (results/figures/**/bars_*.png) from their logs with results/plot.py's bar_figures:

    python -m results.redraw_bars            # every folder of FIGURES
    python -m results.redraw_bars --check    # draw nothing: fail if a chart is too wide or has overlapping text

FIGURES names, per figure folder, the log folders its charts were drawn from (plot.py's table of them is the folder's
summary.csv). Only the bar charts are redrawn; the sweep and Gantt charts and summary.csv stay as they were.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import matplotlib.pyplot as plt

from streamk_pgas.results.plot import BAR_DPI, bar_figures, load_table, text_overlaps

ROOT = Path(__file__).resolve().parent
MAX_WIDTH_PX = 2000

_H200X2 = "h200x2"
FIGURES: dict[str, tuple[str, ...]] = {
    f"{_H200X2}/ab-start-sync-24361bf": ("ab-start-sync-24361bf/ref_device", "ab-start-sync-24361bf/sync4864"),
    f"{_H200X2}/archive-13a41ec/main": ("archive-13a41ec/overlap", "archive-13a41ec/reference"),
    f"{_H200X2}/archive-13a41ec/nojoin": ("archive-13a41ec/nojoin", "archive-13a41ec/reference"),
    f"{_H200X2}/archive-13a41ec/sweep": ("archive-13a41ec/reference", "archive-13a41ec/sweep"),
    f"{_H200X2}/archive-13a41ec/traces": ("archive-13a41ec/traces",),
    f"{_H200X2}/gemm": ("gemm",),
    f"{_H200X2}/run-0d2b978/final": ("run-0d2b978/final", "run-0d2b978/reference"),
    f"{_H200X2}/run-37e6ec3/main": ("run-37e6ec3/overlap", "run-37e6ec3/reference"),
    f"{_H200X2}/run-37e6ec3/sweep": ("run-37e6ec3/sweep", "run-37e6ec3/sweep-reference"),
    f"{_H200X2}/run-37e6ec3/traces": ("run-37e6ec3/traces",),
    f"{_H200X2}/run-57a4e41/main": ("run-57a4e41/overlap", "run-57a4e41/reference"),
    f"{_H200X2}/run-57a4e41/sweep": ("run-57a4e41/reference", "run-57a4e41/sweep"),
    f"{_H200X2}/run-57a4e41/traces": ("run-57a4e41/traces",),
    f"{_H200X2}/run-98080ba/main": ("run-98080ba/overlap", "run-98080ba/reference"),
    f"{_H200X2}/run-98080ba/sweep": ("run-98080ba/reference", "run-98080ba/sweep"),
    f"{_H200X2}/run-d074f7d": ("run-d074f7d",),
    f"{_H200X2}/run-d8acdc8": ("run-d8acdc8",),
    f"{_H200X2}/run-d8acf7e/main": ("run-d8acf7e/overlap", "run-d8acf7e/reference"),
    f"{_H200X2}/run-fe36c48/main": ("run-fe36c48/overlap", "run-fe36c48/reference"),
    f"{_H200X2}/run-fe36c48/sweep": ("run-fe36c48/sweep",),
}


def log_folders(figure: str) -> list[Path]:
    machine = figure.split("/")[0]
    return [ROOT / "logs" / machine / logs for logs in FIGURES[figure]]


def problems(figure: str, write: bool) -> list[str]:
    """Draw one figure folder's bar charts (writing them when `write`); what is wrong with them."""
    out = []
    for name, fig in bar_figures(load_table(log_folders(figure))):
        width = fig.get_figwidth() * BAR_DPI
        if width > MAX_WIDTH_PX:
            out.append(f"{figure}/{name}: {width:.0f} px wide (at most {MAX_WIDTH_PX})")
        out += [f"{figure}/{name}: {a!r} overlaps {b!r}" for a, b in text_overlaps(fig)]
        if write:
            fig.savefig(ROOT / "figures" / figure / name, dpi=BAR_DPI)
        plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m results.redraw_bars", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="draw nothing; exit 1 on a chart too wide or with overlaps")
    args = p.parse_args(argv)
    found = [problem for figure in FIGURES for problem in problems(figure, write=not args.check)]
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
