"""`python -m reference`: parse and check the flags, start the world, run each variant, write the logs.

Exit codes: 0 done (skipped variants included), 1 a validation failed or a rank hit an error,
2 a bad flag (one line on stderr, on every rank, before any process group exists).
"""

from __future__ import annotations

import os
import sys
import traceback

from reference.config import ConfigError, output_paths, parse_config, world_size_from_env


def main(argv: list[str] | None = None) -> int:
    world_size = world_size_from_env()
    try:
        cfg = parse_config(argv, world_size)
    except ConfigError as exc:
        print(f"python -m reference: error: {exc}", file=sys.stderr, flush=True)
        return 2

    # torch and the world only once the flags are known to be good.
    from harness.runlog import write_record
    from reference.runner import run_variant, summary_line
    from reference.world import init_world

    try:
        world = init_world(cfg.device, cfg.timeout_s)
    except Exception as exc:
        print(f"python -m reference: error: could not start the process group: {exc}", file=sys.stderr, flush=True)
        return 1
    paths = output_paths(cfg, world.world_size)
    failed = False
    try:
        for key in cfg.variants:
            record = run_variant(key, world, cfg)
            if world.rank == 0:
                path = paths[key]
                if path is not None:
                    write_record(record, path)
                print(summary_line(record) + (f" -> {path}" if path else ""), flush=True)
            failed |= record["validation"].get("passed") is False
    except Exception:
        # Another rank is likely blocked in a collective: leave at once (mpirun/torchrun stop the rest).
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    world.close()
    return 1 if failed else 0
