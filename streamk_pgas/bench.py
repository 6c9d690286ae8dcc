"""The benchmark: flags -> config (planned once) -> fixture -> validate / time -> log. `streamk-pgas bench` and the
seed's `benchmark.py` both run it:

    mpirun -np 2 streamk-pgas bench --algorithm one_shot --mode fused --validate --benchmark
    mpirun -np 2 python benchmark.py --algorithm one_shot --mode fused --validate --benchmark

Under mpirun the ranks come from MPI; under torchrun from its environment; one process alone is one rank. With
no GPU it runs on the CPU backend in Triton's interpreter at a small default shape and says so. Rank 0 prints a
summary, writes the JSON log (--output_file) and ends with a PASS or FAIL line.
Exit codes (iris_ops.entry.run_main): 0 ok, 1 validation failed, a kernel error, or a rank that died, hung or
never started, 2 a bad flag or environment value, a file that cannot be written, or a heap that cannot be had
(one line naming it, from rank 0, before any work), 130 interrupted.
--algorithm, --mode, --gemm_sms and the communication tile sizes take comma-separated lists: every
combination runs in the same launch (one log each), which is how SM-split sweeps are made.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

from streamk_pgas import spec
from streamk_pgas.harness import runlog
from streamk_pgas.harness.checks import timeout_seconds
from streamk_pgas.harness.config import (
    BenchConfig,
    ConfigError,
    build_parser,
    check_environment,
    check_heap,
    check_outputs,
    expand_sweep,
    output_path,
    parse_config,
    trace_stem,
    tuning_configs,
)
from streamk_pgas.harness.progress import LastLine, Progress
from streamk_pgas.harness.timing import (
    HOST_METHOD,
    LOOP_METHOD,
    LOOP_REPEATS,
    host_us_per_call,
    queue_ahead,
    time_iterations,
    time_loop,
)
from streamk_pgas.harness.timing import METHOD as TIMING_METHOD
from streamk_pgas.harness.validate import describe_failure
from streamk_pgas.iris_ops.bootstrap import Bootstrap, get_bootstrap
from streamk_pgas.iris_ops.entry import run_main
from streamk_pgas.iris_ops.env import on_gpu, set_host_timeout
from streamk_pgas.launch import launch_bench, take_flag
from streamk_pgas.spec import Target

CPU_TIMES = ("CPU backend: Triton's interpreter runs a kernel's programs one after another, so these times say "
             "nothing of a GPU's")


def device_target(boot: Bootstrap) -> Target:
    """This rank's device (after choosing it: one GPU per rank, or a shared one), as the planner sees it."""
    from streamk_pgas.overlap.target import device_target as target_of

    if not on_gpu():
        return target_of(None)  # the interpreter: programs run one after another, any count is "resident"
    from streamk_pgas.iris_ops.backends.cuda_ipc import shared_gpu_index
    from streamk_pgas.iris_ops.env import share_gpu

    n = torch.cuda.device_count()
    if boot.local_size > n and not share_gpu():
        raise ConfigError("-np", f"{boot.local_size} ranks on this node but {n} GPU(s): start at most one rank per GPU")
    index = shared_gpu_index(boot.local_rank)
    torch.cuda.set_device(index)
    return target_of(torch.device("cuda", index))


def fill_heap_size(cfg: BenchConfig, world_size: int) -> None:
    from streamk_pgas.harness.fixture import heap_bytes_needed

    need = heap_bytes_needed(cfg, world_size)
    if "heap_size" in cfg.defaulted:
        cfg.heap_size = need + (1 << 20)
    elif cfg.heap_size < need:
        raise ConfigError("--heap_size", f"{cfg.algorithm} at {cfg.m}x{cfg.n}x{cfg.k} {cfg.datatype} needs at least "
                          f"{need} B of heap per rank, got {cfg.heap_size}")


def say(boot: Bootstrap, *msg: Any) -> None:
    if boot.rank == 0:
        print(*msg, flush=True)


class Run:
    """One configuration: the fixture, its validation and timing, and the log record."""

    def __init__(self, cfg: BenchConfig, boot: Bootstrap, shmem: Any) -> None:
        from streamk_pgas.harness.fixture import OverlapFixture
        from streamk_pgas.iris_ops.device_barrier import DeviceBarrier

        self.cfg, self.boot, self.shmem = cfg, boot, shmem
        shmem.reset_allocator()
        self.fx = OverlapFixture(cfg, shmem)
        # the start barrier records into the op's error words: a peer lost there fails every rank too
        self.start_barrier = DeviceBarrier(shmem, cfg.op.timeout_s, max_stamps=1, errors=self.fx.op.error_state)
        self.fx.prepare()
        self.graph: Any = None
        self.last_line = LastLine()  # shared by the run's phases: a line every ~10 s across short phases too

    def sync(self) -> None:
        if self.fx.on_gpu:
            torch.cuda.synchronize()

    def start_sync(self, _it: int) -> None:
        """The device-side barrier before a start event (--start_sync device)."""
        if self.cfg.start_sync == "device":
            self.start_barrier()

    def progress(self, label: str, total: int) -> Progress:
        """Progress lines of one long phase (rank 0, unless --quiet)."""
        cfg = self.cfg
        return Progress(f"{cfg.algorithm}/{cfg.mode} {label}", total, enabled=self.boot.rank == 0 and not cfg.quiet,
                        last_line=self.last_line)

    def validate_now(self, what: str, steps: int, launch: Any) -> dict[str, Any]:
        """Poison the outputs, run `steps` steps with `launch` back to back (nothing between them), then
        validate every rank's C and share."""
        fx, shmem = self.fx, self.shmem
        fx.poison()
        self.sync()
        fx.barrier()
        progress = self.progress(f"validation, {what}: steps launched", steps)
        step = fx.back_to_back(launch)
        for i in range(steps):
            step()
            progress.tick(i + 1)
        fx.check_errors()
        everyone = shmem.allgather(fx.validate())
        ok = all(v["passed"] for v in everyone)
        for r, v in enumerate(everyone):
            for part in ("global", "partial"):
                if not v[part]["passed"]:
                    say(self.boot, f"VALIDATION FAILED ({what}, {steps} step(s)): rank {r} "
                                   f"{describe_failure(part, v[part])}")
        return {"passed": ok, "steps": steps, "ranks": everyone}

    def validation(self) -> dict[str, Any]:
        cfg = self.cfg
        isolated = self.validate_now("isolated", 1, self.fx.step)
        b2b = self.validate_now("back to back", max(1, cfg.validate_iters), self.fx.step)
        result: dict[str, Any] = {"enabled": True, "passed": isolated["passed"] and b2b["passed"],
                                  "iterations": 1 + b2b["steps"], "ranks": isolated["ranks"],
                                  "back_to_back": {"passed": b2b["passed"], "steps": b2b["steps"]}}
        if self.graph is not None:
            replays = self.validate_now("graph replays", max(1, cfg.validate_iters), self.graph)
            result["graph"] = {"passed": replays["passed"], "steps": replays["steps"]}
            result["passed"] = result["passed"] and replays["passed"]
        if result["passed"]:
            g = isolated["ranks"][0]["global"]
            extra = f", {result['graph']['steps']} graph replays" if "graph" in result else ""
            say(self.boot, f"validation passed on every rank: 1 isolated step, {b2b['steps']} back to back{extra}; "
                           f"global C rel err {g['rel_err']:.3g} (tolerance {g['tolerance']:g})")
        return result

    def timing(self) -> tuple[dict[str, Any], dict[str, Any]]:
        cfg, fx, shmem = self.cfg, self.fx, self.shmem
        on_gpu = fx.on_gpu
        timed = {"iters": cfg.iters, "warmup": cfg.warmup, "barrier": fx.barrier, "use_events": on_gpu,
                 "allgather": shmem.allgather, "start_sync": self.start_sync}
        flops_per_rank = 2 * cfg.m * fx.local_n * fx.local_k
        if not on_gpu:
            say(self.boot, f"note: {CPU_TIMES}")
        e2e, kernels = time_iterations(fx.step, progress=self.progress("isolated steps", cfg.warmup + cfg.iters),
                                       **timed)
        fx.check_errors()
        timing = runlog.timing_section(e2e, kernels, flops_per_rank, cfg.iters, cfg.warmup,
                                       warn=None if on_gpu else False)
        timing["method"] = TIMING_METHOD
        timing["start_sync"] = cfg.start_sync
        # What a model sees: steps back to back, eager and replayed from a CUDA graph; the host's cost per call.
        loops = cfg.warmup + LOOP_REPEATS * cfg.iters
        loop = time_loop(fx.back_to_back(fx.op), progress=self.progress("back-to-back loops: steps", loops), **timed)
        timing["loop"] = runlog.summarize_ms(loop)
        timing["loop_ms"] = timing["loop"]["median"]
        timing["loop_method"] = LOOP_METHOD
        calls = min(cfg.iters, 100)
        host = host_us_per_call(fx.back_to_back(fx.op), calls=calls, barrier=fx.barrier, use_events=on_gpu,
                                progress=self.progress("host cost: calls", calls))
        timing["host_us"] = runlog.summarize_ms(host)
        timing["host_us_per_step"] = timing["host_us"]["median"]
        timing["host_method"] = HOST_METHOD
        timing["fast_launch"] = fx.bound_fast()
        timing["fast_launch_refused"] = fx.fast_refused()
        timing["graph_ms"] = None
        if self.graph is not None:
            graph = time_loop(fx.back_to_back(self.graph), progress=self.progress("graph loops: replays", loops),
                              **timed)
            timing["graph"] = runlog.summarize_ms(graph)
            timing["graph_ms"] = timing["graph"]["median"]
        fx.check_errors()
        components: dict[str, Any] = {}
        if spec.MODES[cfg.mode].overlapped and shmem.get_num_ranks() > 1:  # one rank: no communication to bound
            each = cfg.warmup + cfg.iters
            _, g_alone = time_iterations(fx.gemm_alone, progress=self.progress("overlap bound, GEMM alone", each),
                                         **timed)
            _, c_alone = time_iterations(fx.comm_alone,
                                         progress=self.progress("overlap bound, communication alone", each), **timed)
            fx.check_errors()
            gm = runlog.summarize_ms(g_alone["gemm_alone"])["median"]
            cm = runlog.summarize_ms(c_alone["comm_alone"])["median"]
            bound = max(gm, cm)
            components = {"gemm_alone_ms": gm, "comm_alone_ms": cm, "overlap_bound_ms": bound,
                          "e2e_over_bound": timing["e2e_ms"] / bound if bound > 0 else None}
        graph_txt = f", graph {timing['graph_ms']:.4f} ms" if timing["graph_ms"] is not None else ""
        rate = f" ({timing['tflops'] or 0:.1f} TFLOP/s per GPU)" if on_gpu else ""
        say(self.boot, f"back to back {timing['loop_ms']:.4f} ms/step{graph_txt}; host "
                       f"{timing['host_us_per_step']:.1f} us/step; isolated e2e median {timing['e2e_ms']:.4f} ms over "
                       f"{cfg.iters} iterations{rate}; kernels "
                       + ", ".join(f"{k} {v:.4f} ms" for k, v in timing["kernels_ms"].items())
                       + ("" if on_gpu else " (CPU interpreter times, not GPU figures)"))
        if timing["fast_launch_refused"] and on_gpu:
            say(self.boot, f"note: launches went through Triton's launcher (host cost higher): "
                           f"{timing['fast_launch_refused']}")
        if components and on_gpu:
            say(self.boot, f"overlap bound: GEMM alone on {cfg.op.gemm_sms} SMs {components['gemm_alone_ms']:.4f} ms, "
                           f"communication alone on {cfg.comm_sms} SMs {components['comm_alone_ms']:.4f} ms; "
                           f"e2e / bound = {components['e2e_over_bound']:.3f}")
        return timing, components


def run(cfg: BenchConfig, boot: Bootstrap, shmem: Any, output_file: str | None,
        trace: Path | None) -> tuple[int, dict[str, Any]]:
    """One configuration: validate and/or time it, write its log (and with --trace_tiles its trace, at `trace`).
    Returns (exit status, its timing section)."""
    from streamk_pgas.harness.timing import CapturedStep

    r = Run(cfg, boot, shmem)
    fx = r.fx
    W = shmem.get_num_ranks()
    op, kc = cfg.op, cfg.op.kernel
    if cfg.cpu_small_default:
        say(boot, f"note: no GPU, so this runs on the CPU backend in Triton's interpreter at a small default shape "
                  f"({cfg.m}x{cfg.n}x{cfg.k} {cfg.datatype}, {op.total_sms} programs); pass -m/-n/-k to change it")
    say(boot, f"{cfg.algorithm} / {cfg.mode}: {cfg.m}x{cfg.n}x{cfg.k} {cfg.datatype}, world {W}, "
              f"gemm_sms {op.gemm_sms} of {op.total_sms}, tiles {fx.tiles} "
              f"({kc.BLK_M}x{kc.BLK_N}x{kc.BLK_K}), backend {shmem.backend_name}")
    if W == 1:
        say(boot, f"one rank: nothing to communicate; each step is {fx.op.mode.world_one}")
    if cfg.plan.get("planned"):
        say(boot, f"planned ({cfg.plan['source']}): {', '.join(cfg.plan['planned'])} -> {cfg.plan['choice']}")
    if cfg.debug:
        print(f"[rank {boot.rank}] {fx.info()}", flush=True)
    if cfg.graph:
        if not fx.on_gpu:
            say(boot, "note: --graph needs a GPU (CUDA graphs); skipped on the CPU backend")
        else:
            fx.op()  # one eager step first: binds and warms the launches that the graph captures
            r.graph = CapturedStep(fx.op)
            shmem.barrier()

    status = 0
    validation: dict[str, Any] = {"enabled": cfg.validate, "passed": None}
    if cfg.validate:
        validation = r.validation()
        status = 0 if validation["passed"] else 1

    timing: dict[str, Any] = {"iters": 0, "warmup": 0, "e2e_ms": None, "tflops": None, "kernels_ms": {},
                              "loop_ms": None, "graph_ms": None, "host_us_per_step": None}
    components: dict[str, Any] = {}
    if cfg.benchmark:
        timing, components = r.timing()
    elif not cfg.validate:
        r.sync()
        fx.barrier()
        fx.step()
        fx.check_errors()
        say(boot, "ran 1 iteration (add --validate and/or --benchmark)")

    trace_files: dict[str, str] = {}
    if cfg.trace_tiles and trace is not None:
        trace_files = write_trace(cfg, boot, shmem, fx, r.sync, trace, r.start_barrier)

    if boot.rank == 0 and output_file:
        from streamk_pgas.harness.runlog import new_record, problem_sizes, write_record

        sizes = problem_sizes(spec.ALGORITHMS[cfg.algorithm].family, cfg.m, cfg.n, cfg.k, cfg.datatype, W)
        sizes["tiles"] = fx.tiles
        record = new_record(producer="benchmark", algorithm=cfg.algorithm, implementation="streamk-pgas",
                            mode=cfg.mode, world_size=W, flags=cfg.as_flags(), sizes=sizes, timing=timing,
                            validation=validation,
                            extra={"components": components, "resources": fx.resource_usage(),
                                   "gemm": fx.info(), "trace_files": trace_files,
                                   "launcher": boot.launcher, "heap_backend": shmem.backend_name,
                                   "cpu_small_default": cfg.cpu_small_default,
                                   # SMs whose programs do nothing but communicate (fused_sequential: 0, the
                                   # GEMM programs move the data; bulk_sync: all, after the GEMM)
                                   "comm_sms": fx.op.comm_programs})
        path = write_record(record, output_file)
        print(f"log: {path}", flush=True)
    shmem.barrier()
    timing["validated"] = bool(validation.get("passed"))
    timing["validation_enabled"] = cfg.validate
    return status, timing


def store_tuning(configs: list[BenchConfig], timings: list[dict[str, Any]], boot: Bootstrap, target: Target) -> int:
    """--tune: the fastest validated candidate (back-to-back loop median) goes into the tuning cache (rank 0)."""
    from streamk_pgas.overlap.config import PLANNED_FIELDS
    from streamk_pgas.overlap.planner import Problem, TuningCache

    tried = [{"choice": c.plan["choice"], "predicted_ms": c.plan.get("predicted_ms"),
              "loop_ms": t.get("loop_ms"), "validated": t.get("validated")} for c, t in zip(configs, timings)]
    good = [(t["loop_ms"], i) for i, t in enumerate(timings) if t.get("validated") and t.get("loop_ms")]
    if not good:
        say(boot, "tune: no candidate validated; the tuning cache is left as it was")
        return 1
    ms, best = min(good)
    cfg = configs[best]
    for row in tried:
        say(boot, f"tune: {row['choice']}: {row['loop_ms']} ms/step back to back (model {row['predicted_ms']} ms)"
                  f"{'' if row['validated'] else ' NOT VALIDATED'}")
    if boot.rank == 0:
        cache = TuningCache(cfg.tuning_cache)
        problem = Problem(cfg.algorithm, cfg.m, cfg.n, cfg.k, cfg.datatype, boot.world_size)
        cache.store(problem, target, {f: getattr(cfg.op, f) for f in PLANNED_FIELDS}, ms, tried)
        print(f"tune: stored {cfg.plan['choice']} ({ms:.4f} ms/step) in {cache.path}", flush=True)
    return 0


def write_trace(cfg: BenchConfig, boot: Bootstrap, shmem: Any, runner: Any, sync: Any, stem: Path,
                start_barrier: Any) -> dict[str, str]:
    """One more iteration with per-tile timestamps; rank 0 writes the timeline and the Perfetto trace (stem's
    harness.trace.trace_paths)."""
    runner.tracing = True
    runner.prepare()
    # One untraced-timing step with tracing on first: the traced kernels compile here, not between the
    # start barrier and the traced step (which would put the compile time into the timeline).
    sync()
    runner.barrier()
    runner.step()
    runner.check_errors()
    if runner.on_gpu:
        queue_ahead()  # as in the timed iterations: the traced step's launches are queued before it runs
    # The device barrier lines the ranks up; its exit stamp is each rank's time origin in the timeline
    # (the GPUs' clocks disagree by microseconds to hundreds of microseconds).
    start_barrier(slot=0, wait=cfg.start_sync == "device")
    runner.step()
    runner.tracing = False
    runner.check_errors()
    mine = runner.trace_arrays()
    if cfg.start_sync == "device" and runner.on_gpu:
        mine["origin_ticks"] = int(start_barrier.stamps[0].item())
    op = runner.op
    mine.update(rank=boot.rank, world_size=shmem.get_num_ranks(), algorithm=cfg.algorithm, mode=cfg.mode,
                gemm_sms=op.gemm_programs, comm_sms=op.comm_programs, num_tiles=runner.tiles,
                BLK_M=cfg.op.kernel.BLK_M, BLK_N=cfg.op.kernel.BLK_N, timer_rate_khz=shmem.wall_clock_rate(),
                device=torch.cuda.get_device_name() if runner.on_gpu else "cpu (interpreter)",
                datatype=cfg.datatype, m=cfg.m, n=cfg.n, k=cfg.k)
    everyone = shmem.allgather(mine)
    files: dict[str, str] = {}
    if boot.rank == 0:
        from streamk_pgas.harness.trace import write_traces

        timeline, chrome = write_traces(everyone, stem)
        files = {"timeline": str(timeline), "perfetto": str(chrome)}
        print(f"tile timeline: {timeline}; Perfetto trace (open in ui.perfetto.dev): {chrome}", flush=True)
    return files


def distinct(configs: list[BenchConfig]) -> list[BenchConfig]:
    """The sweep's configs without repeats (e.g. `--mode auto,fused` where the planner chose fused)."""
    seen, out = set(), []
    for cfg in configs:
        key = repr({k: v for k, v in cfg.as_flags().items() if k not in ("plan", "defaulted")})
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out


def verdict(timings: list[dict[str, Any]], status: int, on_gpu: bool) -> str:
    """The run's last line: PASS when every run that was validated passed and nothing failed."""
    validated = sum(1 for t in timings if t.get("validation_enabled"))
    what = (f"{validated} of {len(timings)} run(s) validated on every rank" if validated
            else f"{len(timings)} run(s), not validated (add --validate)")
    cpu = "" if on_gpu else "; CPU backend: times are the interpreter's, not GPU figures"
    return f"{'PASS' if status == 0 else 'FAIL'}: {what}{cpu}"


def host_limit(argv: list[str]) -> float:
    """--timeout_s as given, read before start-up (the op's default when it is left out; a bad value gets the default
    here and is refused with the other flags once every rank has started)."""
    from streamk_pgas.overlap.config import OverlapConfig

    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--timeout_s", default=None)
    try:
        given = early.parse_known_args(argv)[0].timeout_s
        return OverlapConfig.timeout_s if given is None else timeout_seconds(given)
    except (argparse.ArgumentTypeError, SystemExit):
        return OverlapConfig.timeout_s


def main(argv: list[str] | None = None, prog: str = "benchmark.py") -> int:
    """The benchmark's work; bad input raises ConfigError (before any work), a failure its own error. Run it
    through `entry` for one line per failure and the exit codes."""
    argv = sys.argv[1:] if argv is None else argv
    launched = launch_bench(argv, prog)  # --nproc N: this process starts the ranks and becomes their launcher
    if launched is not None:
        return launched
    argv = take_flag(argv, "--nproc")[1]  # with --help: listed there, nothing to launch
    # --timeout_s bounds every wait of the run, the host's too (start-up, barriers, exchanges), not only the
    # kernels' (iris_ops.env.set_host_timeout; IRIS_OPS_TIMEOUT_S is for programs without a limit of their own).
    set_host_timeout(host_limit(argv), "--timeout_s")
    # MPI start-up first: errors found after it reach every rank alike, and rank 0's line is printed before any
    # rank exits.
    boot = get_bootstrap()
    if any(a in ("-h", "--help") for a in argv):
        if boot.rank == 0:
            build_parser(prog).print_help()
        return 0
    backend = check_environment()
    target = device_target(boot)
    configs = [parse_config(a, target, boot.world_size) for a in expand_sweep(argv)]
    configs = distinct(configs)
    tuning = any(cfg.tune for cfg in configs)
    if tuning:
        if len(configs) > 1:
            raise ConfigError("--tune", "tunes one problem at a time: give no comma lists with it")
        configs = tuning_configs(configs[0], target, boot.world_size)
    for cfg in configs:
        fill_heap_size(cfg, boot.world_size)
    check_heap(max(configs, key=lambda c: c.heap_size), target, backend, boot.local_size)
    outputs = [output_path(cfg.output_file, cfg, len(configs) > 1) for cfg in configs]
    traces = [trace_stem(cfg, out) if cfg.trace_tiles else None for cfg, out in zip(configs, outputs)]
    problem = None
    if boot.rank == 0:  # rank 0 writes the logs and traces: it checks they can be written, and tells the others
        try:
            check_outputs(outputs, traces)
        except ConfigError as exc:
            problem = (exc.flag, exc.message)
    problem = boot.broadcast(problem)
    if problem:
        raise ConfigError(*problem)

    if target.interpreted and boot.rank == 0:  # a shape that takes the interpreter hours is said before it starts
        from streamk_pgas.harness.cpu_estimate import interpreter_note

        for note in dict.fromkeys(filter(None, (interpreter_note(cfg, boot.world_size) for cfg in configs))):
            print(note, flush=True)

    from streamk_pgas import iris_ops

    shmem = iris_ops.iris(max(cfg.heap_size for cfg in configs))
    status = 0
    timings = []
    for cfg, output_file, trace in zip(configs, outputs, traces):
        code, timing = run(cfg, boot, shmem, output_file, trace)
        status = max(status, code)
        timings.append(timing)
    if tuning:
        status = max(status, store_tuning(configs, timings, boot, target))
    say(boot, verdict(timings, status, not target.interpreted))
    return status


def entry(argv: list[str] | None = None, prog: str = "benchmark.py") -> int:
    """main's exit code, each failure one line (iris_ops.entry.run_main)."""
    return run_main(lambda: main(argv, prog), prog)
