"""Support code shared by benchmark.py and reference/: config, JSON run logs, timing, validation, traces."""
