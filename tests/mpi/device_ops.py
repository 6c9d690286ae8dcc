"""Every device-API operation of iris_ops, aimed at every rank in turn, in one MPI launch.

    TRITON_INTERPRET=1 mpirun -np 4 python tests/mpi/device_ops.py --json results.json [--cases a,b]
    mpirun -np 2 python tests/mpi/device_ops.py --json results.json        # on 2 GPUs

Each rank runs each case of tests/mpi/device_cases.py against every rank (itself included). Values
encode the source rank, the target rank and the element index, so a value that lands in the wrong
rank, row or lane is caught. Every rank checks its own memory afterwards: the lanes the operation
owns hold the expected result, lanes outside the mask and guard regions before and after keep
their sentinels, and atomics return the old values. Rank 0 writes one JSON summary:

    {"world_size": W, "interpreter": bool, "cases": {"<op>-<dtype>": {"status": "pass" | "fail" |
     "skip" | "xfail", "reason": str, "errors": [str, ...]}}}

The exit code is 0 whenever the summary was written (the verdicts are in it), so one failing case
does not hide the others; pytest (tests/test_iris_device_ops.py) turns each case into a test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
from device_cases import CASES, INTERPRETER_GAPS

from streamk_pgas import iris_ops
from streamk_pgas.iris_ops.env import interpreted

INTERPRET = interpreted()
BLOCK = 16  # elements per row an operation touches
G = 16  # guard elements on each side of a row
SPAN = G + BLOCK + G
SENT = -1000  # sentinel: exact in every dtype, never produced by an encoding below
DTYPES = {
    "int32": torch.int32,
    "int64": torch.int64,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp32": torch.float32,
}
GET_ORDER_REASON = (
    "iris_ops.device.get(from_ptr, to_ptr, from_rank, to_rank) reads from_rank's copy (Iris's docstring), but "
    "Iris's code and tests call get(src_ptr, dst_ptr, cur_rank, target_rank, ...) and read "
    "target_rank's copy; with iris_ops an Iris program's remote get reads an address outside every heap"
)

# op codes of rma_kernel
OP_STORE, OP_LOAD, OP_GET, OP_GET_SWAPPED, OP_PUT = 0, 1, 2, 3, 4
OP_ADD, OP_SUB, OP_XCHG, OP_AND, OP_OR, OP_XOR, OP_MIN, OP_MAX, OP_CAS, OP_TRANSLATE = range(5, 15)


# ---------------------------------------------------------------------------------------------
# Kernels


@triton.jit
def rma_kernel(buf, src, cmp, out, addr, heap_bases, cur_rank,
               SPAN: tl.constexpr, G: tl.constexpr, BLOCK: tl.constexpr, OP: tl.constexpr):
    """Program t applies OP to rank t's copy of this rank's row (`buf[cur_rank]`)."""
    t = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = (i % 3) != 1
    mine = buf + cur_rank * SPAN + G + i
    v = tl.load(src + t * BLOCK + i)
    o = out + t * BLOCK + i
    if OP == 0:
        iris_ops.store(mine, v, cur_rank, t, heap_bases, mask=m)
    elif OP == 1:
        tl.store(o, iris_ops.load(mine, cur_rank, t, heap_bases, mask=m), mask=m)
    elif OP == 2:
        iris_ops.get(mine, o, cur_rank, t, heap_bases, mask=m)
    elif OP == 3:
        iris_ops.get(mine, o, t, cur_rank, heap_bases, mask=m)
    elif OP == 4:
        iris_ops.put(src + t * BLOCK + i, mine, cur_rank, t, heap_bases, mask=m)
    elif OP == 5:
        tl.store(o, iris_ops.atomic_add(mine, v, cur_rank, t, heap_bases, mask=m, sem="acq_rel", scope="sys"), mask=m)
    elif OP == 6:
        tl.store(o, iris_ops.atomic_sub(mine, v, cur_rank, t, heap_bases, mask=m, sem="release", scope="sys"), mask=m)
    elif OP == 7:
        tl.store(o, iris_ops.atomic_xchg(mine, v, cur_rank, t, heap_bases, mask=m, sem="acquire", scope="sys"), mask=m)
    elif OP == 8:
        tl.store(o, iris_ops.atomic_and(mine, v, cur_rank, t, heap_bases, mask=m), mask=m)
    elif OP == 9:
        tl.store(o, iris_ops.atomic_or(mine, v, cur_rank, t, heap_bases, mask=m), mask=m)
    elif OP == 10:
        tl.store(o, iris_ops.atomic_xor(mine, v, cur_rank, t, heap_bases, mask=m), mask=m)
    elif OP == 11:
        tl.store(o, iris_ops.atomic_min(mine, v, cur_rank, t, heap_bases, mask=m), mask=m)
    elif OP == 12:
        tl.store(o, iris_ops.atomic_max(mine, v, cur_rank, t, heap_bases, mask=m), mask=m)
    elif OP == 13:
        c = tl.load(cmp + t * BLOCK + i)
        tl.store(o, iris_ops.atomic_cas(mine, c, v, cur_rank, t, heap_bases, sem="acq_rel", scope="sys"))
    else:
        p = iris_ops.translate(mine, cur_rank, t, heap_bases)
        tl.store(addr + t * BLOCK + i, p.to(tl.int64))
        tl.store(p, v, mask=m)


@triton.jit
def get_probe_kernel(src, dst, fake_bases, BLOCK: tl.constexpr):
    """get() in Iris's argument order (cur_rank=0, target_rank=1) over fake bases 1 KiB apart, all local."""
    i = tl.arange(0, BLOCK)
    iris_ops.get(src + i, dst + i, 0, 1, fake_bases)


@triton.jit
def concurrent_add_kernel(cnt, src, olds, heap_bases, cur_rank,
                          G: tl.constexpr, REPS: tl.constexpr, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    m = (i % 3) != 1
    inc = tl.load(src + i)
    for rep in range(REPS):
        old = iris_ops.atomic_add(cnt + G + i, inc, cur_rank, t, heap_bases, mask=m, sem="relaxed", scope="sys")
        tl.store(olds + (t * REPS + rep) * BLOCK + i, old, mask=m)


@triton.jit
def notify_kernel(flags, heap_bases, cur_rank, G: tl.constexpr):
    t = tl.program_id(0)
    iris_ops.notify(flags + G + cur_rank, 7, cur_rank, t, heap_bases)
    iris_ops.notify(flags + G + cur_rank, 100 * (cur_rank + 1) + t, cur_rank, t, heap_bases, scope="sys")


@triton.jit
def notify_add_kernel(counter, ok, heap_bases, cur_rank, num_ranks, max_spins, G: tl.constexpr, REPS: tl.constexpr):
    for _rep in range(REPS):
        for t in range(num_ranks):
            iris_ops.notify_add(counter + G, cur_rank + 1, cur_rank, t, heap_bases)
    total = REPS * num_ranks * (num_ranks + 1) // 2
    reached = iris_ops.wait(counter + G, total, cur_rank, cur_rank, heap_bases, max_spins)
    tl.store(ok, reached.to(tl.int32))


@triton.jit
def push_handshake_kernel(flag, payload, out, ok, heap_bases, cur_rank, num_ranks, max_spins,
                          EPOCHS: tl.constexpr, BLOCK: tl.constexpr):
    """Each epoch: store a payload into the next rank, raise its flag, wait for ours, read what arrived."""
    i = tl.arange(0, BLOCK)
    nxt = (cur_rank + 1) % num_ranks
    for e in range(1, EPOCHS + 1):
        slot = (e - 1) * BLOCK + i
        iris_ops.store(payload + slot, e * 1000 + cur_rank * 16 + i, cur_rank, nxt, heap_bases)
        iris_ops.notify(flag, e, cur_rank, nxt, heap_bases)
        reached = iris_ops.wait(flag, e, cur_rank, cur_rank, heap_bases, max_spins)
        tl.store(out + slot, tl.load(payload + slot))
        tl.store(ok + e - 1, reached.to(tl.int32))


@triton.jit
def pull_handshake_kernel(flag, payload, out, ok, heap_bases, cur_rank, num_ranks, max_spins,
                          EPOCHS: tl.constexpr, BLOCK: tl.constexpr):
    """Each epoch: publish a payload locally, raise our own flag, wait on the previous rank's, load its payload."""
    i = tl.arange(0, BLOCK)
    prv = (cur_rank + num_ranks - 1) % num_ranks
    for e in range(1, EPOCHS + 1):
        slot = (e - 1) * BLOCK + i
        tl.store(payload + slot, e * 1000 + cur_rank * 16 + i)
        iris_ops.notify(flag, e, cur_rank, cur_rank, heap_bases)
        reached = iris_ops.wait(flag, e, cur_rank, prv, heap_bases, max_spins)
        tl.store(out + slot, iris_ops.load(payload + slot, cur_rank, prv, heap_bases))
        tl.store(ok + e - 1, reached.to(tl.int32))


@triton.jit
def wait_timeout_kernel(flag, res, heap_bases, cur_rank, max_spins):
    """Every flag holds 5; program t waits on rank t's flag for values above and below it."""
    t = tl.program_id(0)
    tl.store(res + t * 4 + 0, iris_ops.wait(flag, 6, cur_rank, t, heap_bases, max_spins).to(tl.int32))
    tl.store(res + t * 4 + 1, iris_ops.wait(flag, 5, cur_rank, t, heap_bases, max_spins).to(tl.int32))
    tl.store(res + t * 4 + 2, iris_ops.wait(flag, 4, cur_rank, t, heap_bases, max_spins).to(tl.int32))
    tl.store(res + t * 4 + 3, iris_ops.wait(flag, 1 << 30, cur_rank, t, heap_bases, max_spins).to(tl.int32))


@triton.jit
def wait_local_kernel(flag, res, heap_bases, cur_rank, num_ranks, max_spins):
    nxt = (cur_rank + 1) % num_ranks
    iris_ops.notify(flag, 9, cur_rank, nxt, heap_bases)
    tl.store(res + 0, iris_ops.wait_local(flag, 9, max_spins, scope="sys").to(tl.int32))
    tl.store(res + 1, iris_ops.wait_local(flag, 10, 50).to(tl.int32))


@triton.jit
def timer_kernel(clock, out, idle_flag, delay_spins, N: tl.constexpr, KIND: tl.constexpr):
    for n in range(N):
        tl.store(out + n, iris_ops.read_timer(clock, KIND))
        iris_ops.wait_local(idle_flag, 1, delay_spins)  # a delay: nobody raises this flag


@triton.jit
def record_error_kernel(err, kind0, tile0, kind1, tile1):
    iris_ops.record_error(err, kind0, tile0)
    iris_ops.record_error(err, kind1, tile1)


# ---------------------------------------------------------------------------------------------
# Expected values


class CaseSkip(Exception):
    pass


class CaseXfail(Exception):
    pass


@dataclass
class Ctx:
    sh: Any  # iris_ops.Iris
    rank: int
    world: int
    bases: list[int]
    get_order: str = "unknown"  # "iris" | "swapped" | "broken"

    def sync(self) -> None:
        self.sh.barrier()

    def launch(self, fn: Callable[[], None]) -> BaseException | None:
        """Run a kernel launch; whatever happens, meet the other ranks afterwards."""
        error: BaseException | None = None
        try:
            fn()
            if self.sh.device.type == "cuda":
                torch.cuda.synchronize()
        except Exception as exc:
            error = exc
        self.sync()
        return error

    @property
    def spins(self) -> int:
        """Polls for a wait that should succeed: about 10-20 s before it gives up.

        Not spin_budget(): it assumes 5 us per poll in the interpreter, where a poll takes ~1 ms.
        """
        return 10_000 if INTERPRET else iris_ops.spin_budget(20.0)


def idx() -> torch.Tensor:
    return torch.arange(BLOCK, dtype=torch.int64)


def active() -> torch.Tensor:
    return idx() % 3 != 1


def enc(a: int, b: int) -> torch.Tensor:
    """Distinct for every (a, b, lane) with a, b < 4: 0..255, exact even in bf16."""
    return 64 * a + 16 * b + idx()


def is_float(dt: str) -> bool:
    return dt.startswith(("fp", "bf"))


def hi(dt: str, k: int) -> int:
    """A term in the upper bits, so that integer ops are checked over the dtype's full width."""
    return {"int64": k << 36, "int32": k << 22}.get(dt, 0)


def wide(t: torch.Tensor, dt: str) -> torch.Tensor:
    return t.to(torch.float64 if is_float(dt) else torch.int64)


@dataclass
class Spec:
    code: int
    init: Callable[[int, int], torch.Tensor]  # (owner rank, row) -> the row before the op
    val: Callable[[int, int], torch.Tensor]  # (source rank, target rank) -> operand
    final: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # (init, val, cmp) -> after
    ret: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None  # value put in out
    cmp: Callable[[int, int], torch.Tensor] | None = None
    masked: bool = True


def spec_for(op: str, dt: str) -> Spec:
    def sent(_a: int, _b: int) -> torch.Tensor:
        return torch.full((BLOCK,), SENT, dtype=torch.int64)

    def data(a: int, b: int) -> torch.Tensor:
        return enc(a, b) + hi(dt, 1)

    def keep(x: torch.Tensor, _v: torch.Tensor, _c: torch.Tensor) -> torch.Tensor:
        return x

    def new(_x: torch.Tensor, v: torch.Tensor, _c: torch.Tensor) -> torch.Tensor:
        return v

    if op in ("store", "put", "translate"):
        code = {"store": OP_STORE, "put": OP_PUT, "translate": OP_TRANSLATE}[op]
        return Spec(code, init=sent, val=data, final=new)
    if op in ("load", "get"):
        code = OP_LOAD if op == "load" else OP_GET
        return Spec(code, init=data, val=sent, final=keep, ret=keep)

    def centred(a: int, b: int) -> torch.Tensor:
        return enc(a, b) - 128 + hi(dt, 1)  # -128..127: sums and differences stay exact in bf16

    if op == "atomic_add":
        return Spec(OP_ADD, init=centred, val=lambda a, b: enc(a, b) - 128 + hi(dt, 2),
                    final=lambda x, v, c: x + v, ret=keep)
    if op == "atomic_sub":
        return Spec(OP_SUB, init=centred, val=lambda a, b: enc(a, b) - 128 + hi(dt, 2),
                    final=lambda x, v, c: x - v, ret=keep)
    if op == "atomic_xchg":
        return Spec(OP_XCHG, init=data, val=lambda a, b: enc(a, b) + 300 + hi(dt, 2), final=new, ret=keep)
    if op in ("atomic_min", "atomic_max"):
        # +-3 on alternate lanes: when a rank targets itself, both outcomes of the comparison occur
        def operand(a: int, b: int) -> torch.Tensor:
            return centred(a, b) + torch.where(idx() % 2 == 0, 3, -3)

        if op == "atomic_min":
            return Spec(OP_MIN, init=centred, val=operand, final=lambda x, v, c: torch.minimum(x, v), ret=keep)
        return Spec(OP_MAX, init=centred, val=operand, final=lambda x, v, c: torch.maximum(x, v), ret=keep)
    if op in ("atomic_and", "atomic_or", "atomic_xor"):
        def bits_init(a: int, b: int) -> torch.Tensor:
            return (enc(a, b) | 0xA500) + hi(dt, 5)

        def bits_val(a: int, b: int) -> torch.Tensor:
            return ((enc(a, b) * 37) ^ 0x3C3) + hi(dt, 6)

        fn = {"atomic_and": torch.bitwise_and, "atomic_or": torch.bitwise_or, "atomic_xor": torch.bitwise_xor}[op]
        code = {"atomic_and": OP_AND, "atomic_or": OP_OR, "atomic_xor": OP_XOR}[op]
        return Spec(code, init=bits_init, val=bits_val, final=lambda x, v, c: fn(x, v), ret=keep)
    if op == "atomic_cas":
        # The source s compares against what rank t holds in row s, off by one on odd lanes (no swap there).
        return Spec(OP_CAS, init=data, val=lambda a, b: enc(a, b) + 512 + hi(dt, 2),
                    cmp=lambda s, t: data(t, s) + idx() % 2,
                    final=lambda x, v, c: torch.where(x == c, v, x), ret=keep, masked=False)
    raise KeyError(op)


def compare(errors: list[str], where: str, actual: torch.Tensor, expected: torch.Tensor, dt: str) -> None:
    got = wide(actual.cpu(), dt)
    exp = wide(expected, dt)
    if not torch.equal(got, exp):
        bad = (got != exp).nonzero().flatten().tolist()
        errors.append(f"{where}: lanes {bad[:8]} expected {exp[bad[:8]].tolist()} got {got[bad[:8]].tolist()}")


# ---------------------------------------------------------------------------------------------
# Cases


def case_rma(ctx: Ctx, op: str, dt: str) -> list[str]:
    tdt = DTYPES[dt]
    spec = spec_for(op, dt)
    code = spec.code
    if op == "get":
        if ctx.get_order == "swapped":
            code = OP_GET_SWAPPED  # device.py's own order, so the data path is still exercised
        elif ctx.get_order != "iris":
            raise CaseSkip("get's argument order could not be determined (see get_argument_order-int32)")
    me, w, sh = ctx.rank, ctx.world, ctx.sh
    mask = active() if spec.masked else torch.ones(BLOCK, dtype=torch.bool)
    zero = torch.zeros(BLOCK, dtype=torch.int64)

    buf = sh.full((w, SPAN), SENT, dtype=tdt)
    for row in range(w):
        buf[row, G : G + BLOCK] = spec.init(me, row).to(tdt)
    src = sh.zeros((w, BLOCK), dtype=tdt)
    cmp = sh.zeros((w, BLOCK), dtype=tdt)
    for t in range(w):
        src[t] = spec.val(me, t).to(tdt)
        if spec.cmp is not None:
            cmp[t] = spec.cmp(me, t).to(tdt)
    out = sh.full((w, BLOCK), SENT, dtype=tdt)
    addr = sh.zeros((w, BLOCK), dtype=torch.int64)
    hb = sh.get_heap_bases()
    ctx.sync()
    error = ctx.launch(lambda: rma_kernel[(w,)](buf, src, cmp, out, addr, hb, me, SPAN, G, BLOCK, code))
    if error is not None:
        raise error

    errors: list[str] = []
    for row in range(w):  # row `row` of my buffer belongs to source rank `row`
        got = buf[row].cpu()
        compare(errors, f"rank {me} row {row}: guard before", got[:G], torch.full((G,), SENT), dt)
        compare(errors, f"rank {me} row {row}: guard after", got[G + BLOCK :], torch.full((G,), SENT), dt)
        init = wide(spec.init(me, row).to(tdt), dt)
        val = wide(spec.val(row, me).to(tdt), dt)
        cmpv = wide(spec.cmp(row, me).to(tdt), dt) if spec.cmp is not None else zero
        expected = torch.where(mask, spec.final(init, val, cmpv), init)
        compare(errors, f"rank {me} row {row} (written by rank {row})", got[G : G + BLOCK], expected, dt)
    for t in range(w):  # what my operation on rank t returned
        if spec.ret is None:
            expected = torch.full((BLOCK,), SENT, dtype=torch.int64)
        else:
            init = wide(spec.init(t, me).to(tdt), dt)
            val = wide(spec.val(me, t).to(tdt), dt)
            cmpv = wide(spec.cmp(me, t).to(tdt), dt) if spec.cmp is not None else zero
            expected = torch.where(mask, spec.ret(init, val, cmpv), torch.full_like(init, SENT))
        compare(errors, f"rank {me} -> rank {t}: returned values", out[t], expected, dt)
    if op == "translate":
        esize = buf.element_size()
        for t in range(w):
            mine = buf.data_ptr() + (me * SPAN + G) * esize + idx() * esize
            expected = ctx.bases[t] + (mine - ctx.bases[me])
            compare(errors, f"rank {me} -> rank {t}: translated address", addr[t], expected, "int64")
    if op == "get" and ctx.get_order == "swapped" and not errors:
        raise CaseXfail(GET_ORDER_REASON + "; with the rank arguments swapped every data check passed")
    return errors


def case_get_argument_order(ctx: Ctx, dt: str) -> list[str]:
    sh = ctx.sh
    probe = sh.zeros(3 * 256, dtype=torch.int32)  # three 1 KiB chunks: 1s | 2s | 3s
    for k in range(3):
        probe[k * 256 : (k + 1) * 256] = k + 1
    dst = sh.zeros(BLOCK, dtype=torch.int32)
    base = ctx.bases[ctx.rank]
    fake = torch.tensor([base, base + 1024], dtype=torch.int64, device=sh.device)
    error = ctx.launch(lambda: get_probe_kernel[(1,)](probe[256:], dst, fake, BLOCK))
    if error is not None:
        raise error
    got = dst.cpu().tolist()
    if got == [3] * BLOCK:
        ctx.get_order = "iris"
        return []
    if got == [1] * BLOCK:
        ctx.get_order = "swapped"
        raise CaseXfail(GET_ORDER_REASON)
    ctx.get_order = "broken"
    return [f"get(src, dst, 0, 1, bases 1 KiB apart) read {got}; expected the chunk after src (3s)"]


def case_concurrent_add(ctx: Ctx, dt: str) -> list[str]:
    tdt = DTYPES[dt]
    me, w, sh = ctx.rank, ctx.world, ctx.sh
    reps = 8  # REPS * W(W+1)/2 <= 80: exact in bf16
    mask = active()
    cnt = sh.full((SPAN,), SENT, dtype=tdt)
    cnt[G : G + BLOCK] = 0
    src = sh.full((BLOCK,), me + 1, dtype=tdt)
    olds = sh.full((w, reps, BLOCK), SENT, dtype=tdt)
    hb = sh.get_heap_bases()
    ctx.sync()
    error = ctx.launch(lambda: concurrent_add_kernel[(w,)](cnt, src, olds, hb, me, G, reps, BLOCK))
    if error is not None:
        raise error
    errors: list[str] = []
    got = cnt.cpu()
    total = reps * w * (w + 1) // 2
    compare(errors, f"rank {me}: guard before", got[:G], torch.full((G,), SENT), dt)
    compare(errors, f"rank {me}: guard after", got[G + BLOCK :], torch.full((G,), SENT), dt)
    compare(errors, f"rank {me}: sum of every rank's adds", got[G : G + BLOCK],
            torch.where(mask, torch.tensor(total), torch.tensor(0)), dt)
    # Old values: for each word, the adds of all ranks form one chain 0 -> ... -> total.
    everyone = sh.allgather(wide(olds.cpu(), dt).tolist())
    for lane in range(BLOCK):
        if not mask[lane]:
            for s in range(w):
                if any(everyone[s][me][r][lane] != SENT for r in range(reps)):
                    errors.append(f"rank {me} lane {lane}: masked-off lane returned a value to rank {s}")
            continue
        olds_seen = [everyone[s][me][r][lane] for s in range(w) for r in range(reps)]
        news = [everyone[s][me][r][lane] + s + 1 for s in range(w) for r in range(reps)]
        if Counter([0, *news]) != Counter([*olds_seen, total]):
            errors.append(f"rank {me} lane {lane}: old values {sorted(olds_seen)} are not one chain of adds")
            break
    return errors


def case_notify(ctx: Ctx, dt: str) -> list[str]:
    me, w, sh = ctx.rank, ctx.world, ctx.sh
    flags = sh.full((G + w + G,), SENT, dtype=torch.int32)
    flags[G : G + w] = -1
    hb = sh.get_heap_bases()
    ctx.sync()
    error = ctx.launch(lambda: notify_kernel[(w,)](flags, hb, me, G))
    if error is not None:
        raise error
    errors: list[str] = []
    expected = torch.full((G + w + G,), SENT, dtype=torch.int64)
    expected[G : G + w] = torch.tensor([100 * (s + 1) + me for s in range(w)])
    compare(errors, f"rank {me}: flags (one per source rank, with guards)", flags, expected, "int32")
    return errors


def case_notify_add(ctx: Ctx, dt: str) -> list[str]:
    me, w, sh = ctx.rank, ctx.world, ctx.sh
    reps = 3
    counter = sh.full((G + 1 + G,), SENT, dtype=torch.int32)
    counter[G] = 0
    ok = sh.zeros(1, dtype=torch.int32)
    hb = sh.get_heap_bases()
    ctx.sync()
    error = ctx.launch(lambda: notify_add_kernel[(1,)](counter, ok, hb, me, w, ctx.spins, G, reps))
    if error is not None:
        raise error
    errors: list[str] = []
    expected = torch.full((G + 1 + G,), SENT, dtype=torch.int64)
    expected[G] = reps * w * (w + 1) // 2
    compare(errors, f"rank {me}: counter (with guards)", counter, expected, "int32")
    if int(ok.item()) != 1:
        errors.append(f"rank {me}: wait for the full count returned False")
    return errors


def case_handshake(ctx: Ctx, kind: str) -> list[str]:
    me, w, sh = ctx.rank, ctx.world, ctx.sh
    epochs = 4
    flag = sh.zeros(1, dtype=torch.int32)
    payload = sh.full((epochs, BLOCK), SENT, dtype=torch.int32)
    out = sh.full((epochs, BLOCK), SENT, dtype=torch.int32)
    ok = sh.zeros(epochs, dtype=torch.int32)
    hb = sh.get_heap_bases()
    kernel = push_handshake_kernel if kind == "push" else pull_handshake_kernel
    ctx.sync()
    error = ctx.launch(lambda: kernel[(1,)](flag, payload, out, ok, hb, me, w, ctx.spins, epochs, BLOCK))
    if error is not None:
        raise error
    errors: list[str] = []
    prv = (me - 1) % w
    if ok.cpu().tolist() != [1] * epochs:
        errors.append(f"rank {me}: wait results per epoch {ok.cpu().tolist()}, expected all 1")
    for e in range(1, epochs + 1):
        compare(errors, f"rank {me} epoch {e}: payload from rank {prv}", out[e - 1],
                e * 1000 + prv * 16 + idx(), "int32")
    final_flag = epochs
    if int(flag.item()) != final_flag:
        errors.append(f"rank {me}: flag is {int(flag.item())}, expected {final_flag}")
    return errors


def case_wait_timeout(ctx: Ctx, dt: str) -> list[str]:
    me, w, sh = ctx.rank, ctx.world, ctx.sh
    flag = sh.full((1,), 5, dtype=torch.int32)
    res = sh.full((w, 4), -1, dtype=torch.int32)
    hb = sh.get_heap_bases()
    ctx.sync()
    error = ctx.launch(lambda: wait_timeout_kernel[(w,)](flag, res, hb, me, 50))
    if error is not None:
        raise error
    errors: list[str] = []
    for t in range(w):
        got = res[t].cpu().tolist()
        if got != [0, 1, 1, 0]:
            errors.append(f"rank {me} waiting on rank {t}'s flag (5) for 6, 5, 4, 2**30: got {got}, "
                          "expected [0, 1, 1, 0] (False on timeout)")
    if int(flag.item()) != 5:
        errors.append(f"rank {me}: waiting changed the flag to {int(flag.item())}")
    return errors


def case_wait_local(ctx: Ctx, dt: str) -> list[str]:
    me, w, sh = ctx.rank, ctx.world, ctx.sh
    flag = sh.zeros(1, dtype=torch.int32)
    res = sh.full((2,), -1, dtype=torch.int32)
    hb = sh.get_heap_bases()
    ctx.sync()
    error = ctx.launch(lambda: wait_local_kernel[(1,)](flag, res, hb, me, w, ctx.spins))
    if error is not None:
        raise error
    got = res.cpu().tolist()
    if got != [1, 0]:
        return [f"rank {me}: wait_local for the flag raised by rank {(me - 1) % w}, then for an unraised value: "
                f"got {got}, expected [1, 0]"]
    return []


def case_read_timer(ctx: Ctx, dt: str) -> list[str]:
    sh = ctx.sh
    n = 8
    kind = iris_ops.default_timer_kind()
    clock = sh.full((1,), 100, dtype=torch.int64)
    out = sh.zeros(n, dtype=torch.int64)
    idle = sh.zeros(1, dtype=torch.int32)
    delay = 1 if kind == iris_ops.TIMER_LOGICAL else 2000
    error = ctx.launch(lambda: timer_kernel[(1,)](clock, out, idle, delay, n, kind))
    if error is not None:
        raise error
    ts = out.cpu().tolist()
    if kind == iris_ops.TIMER_LOGICAL:
        if ts != list(range(100, 100 + n)) or int(clock.item()) != 100 + n:
            return [f"logical clock read {ts} (clock now {int(clock.item())}); expected 100..{99 + n}, then {100 + n}"]
        return []
    if any(b < a for a, b in itertools.pairwise(ts)) or ts[-1] <= ts[0]:
        return [f"timer (kind {kind}) read {ts}: expected non-decreasing and advancing"]
    return []


def case_record_error(ctx: Ctx, dt: str) -> list[str]:
    from streamk_pgas.iris_ops.device import ERROR_KIND_SCALE

    err = ctx.sh.zeros(1, dtype=torch.int32)
    error = ctx.launch(lambda: record_error_kernel[(1,)](
        err, iris_ops.ERR_PEER_READY, 7, iris_ops.ERR_TILE_READY, 3))
    if error is not None:
        raise error
    code = int(err.item())
    errors = []
    if code != iris_ops.ERR_PEER_READY * ERROR_KIND_SCALE + 8:
        errors.append(f"error word {code}: expected the first error (peer ready, tile 7) to win")
    text = iris_ops.decode_error(code)
    if "peer" not in text or "tile 7" not in text:
        errors.append(f"decode_error({code}) = {text!r}")
    if iris_ops.decode_error(0) != "no error":
        errors.append(f"decode_error(0) = {iris_ops.decode_error(0)!r}")
    return errors


def run_case(ctx: Ctx, case: str) -> dict[str, Any]:
    op, dt = case.rsplit("-", 1)
    if INTERPRET and case == "atomic_add_concurrent-fp16":
        return {"status": "skip", "errors": [],
                "reason": f"Triton's CPU interpreter: {INTERPRETER_GAPS[case]} (the GPU run covers it)"}
    try:
        if op == "get_argument_order":
            errors = case_get_argument_order(ctx, dt)
        elif op == "atomic_add_concurrent":
            errors = case_concurrent_add(ctx, dt)
        elif op == "notify":
            errors = case_notify(ctx, dt)
        elif op == "notify_add":
            errors = case_notify_add(ctx, dt)
        elif op in ("wait_push_handshake", "wait_pull_handshake"):
            errors = case_handshake(ctx, op.split("_")[1])
        elif op == "wait_timeout":
            errors = case_wait_timeout(ctx, dt)
        elif op == "wait_local":
            errors = case_wait_local(ctx, dt)
        elif op == "read_timer":
            errors = case_read_timer(ctx, dt)
        elif op == "record_error":
            errors = case_record_error(ctx, dt)
        else:
            errors = case_rma(ctx, op, dt)
    except CaseSkip as exc:
        return {"status": "skip", "reason": str(exc), "errors": []}
    except CaseXfail as exc:
        return {"status": "xfail", "reason": str(exc), "errors": []}
    except Exception as exc:
        gap = INTERPRETER_GAPS.get(case)
        if INTERPRET and gap is not None and gap in str(exc):
            return {"status": "skip", "errors": [],
                    "reason": f"Triton's CPU interpreter: {op} on {dt} raises '{gap}' (the GPU run covers it)"}
        tb = traceback.format_exc(limit=4)
        return {"status": "fail", "reason": f"{type(exc).__name__}: {exc}", "errors": [tb]}
    return {"status": "fail" if errors else "pass", "reason": "", "errors": errors}


def merge(per_rank: list[dict[str, Any]]) -> dict[str, Any]:
    statuses = [r["status"] for r in per_rank]
    errors = [f"rank {k}: {e}" for k, r in enumerate(per_rank) for e in r["errors"]]
    reasons = sorted({r["reason"] for r in per_rank if r["reason"]})
    if "fail" in statuses:
        status = "fail"
    elif all(s == "skip" for s in statuses):
        status = "skip"
    elif "xfail" in statuses:
        status = "xfail"
    elif all(s == "pass" for s in statuses):
        status = "pass"
    else:
        status = "fail"
        errors.append(f"ranks disagree: {statuses}")
    return {"status": status, "reason": "; ".join(reasons), "errors": errors[:20]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="where rank 0 writes the summary")
    parser.add_argument("--cases", default="", help="comma-separated case ids (default: all)")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c] or list(CASES)
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}")
    if "get" in {c.rsplit("-", 1)[0] for c in cases} and "get_argument_order-int32" not in cases:
        cases.insert(0, "get_argument_order-int32")  # get's cases depend on the probe
    cases.sort(key=lambda c: c != "get_argument_order-int32")

    sh = iris_ops.iris(8 << 20)
    w = sh.get_num_ranks()
    if w > 4:
        raise SystemExit("device_ops.py encodes ranks in 2 bits: run it with at most 4 ranks")
    ctx = Ctx(sh=sh, rank=sh.get_rank(), world=w, bases=[int(b) for b in sh.get_heap_bases().cpu().tolist()])
    mine = {}
    for case in cases:
        mine[case] = run_case(ctx, case)
        sh.barrier()
    everyone = sh.allgather(mine)
    if ctx.rank == 0:
        summary = {
            "world_size": w,
            "interpreter": INTERPRET,
            "backend": sh.backend_name,
            "cases": {case: merge([everyone[r][case] for r in range(w)]) for case in cases},
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=1))
        counts = Counter(v["status"] for v in summary["cases"].values())
        for case, res in summary["cases"].items():
            line = f"{case:32s} {res['status']}"
            if res["status"] != "pass":
                line += f"  {res['reason'][:150]}"
            print(line)
            for e in res["errors"][:3]:
                print("    " + e.strip().replace("\n", "\n    "))
        print(f"world size {w}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
    sh.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
