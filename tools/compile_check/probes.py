"""Small kernels that call every function of the Iris device API (iris_ops.device), for the compile check.

Each probe is parametrised by constexprs, so one probe covers an operation family: the datatype comes from the
buffer's element type, the operation, memory semantics and scope from constexprs. The values they compute are
never looked at (tests/mpi/device_ops.py checks them on the interpreter and on GPUs); what matters here is that
each call lowers on each target.
"""

from __future__ import annotations

import triton
import triton.language as tl

from streamk_pgas.iris_ops.device import (
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xchg,
    atomic_xor,
    fence_proxy_async_global,
    get,
    load,
    notify,
    notify_add,
    put,
    read_timer,
    record_error,
    store,
    translate,
    wait,
    wait_bulk_stores,
    wait_local,
)

ATOMIC_OPS = ("add", "sub", "xchg", "and", "or", "xor", "min", "max", "cas")
SEMS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("cta", "gpu", "sys")


@triton.jit
def rma_probe(buf, src, out, heap_bases, cur_rank, target_rank, BLOCK: tl.constexpr):
    """translate, load, store, get and put on BLOCK elements of target_rank's copy of `buf` (masked but translate)."""
    i = tl.arange(0, BLOCK)
    m = (i % 3) != 1
    tl.store(out + i, tl.load(translate(buf + i, cur_rank, target_rank, heap_bases)))
    tl.store(out + BLOCK + i, load(buf + i, cur_rank, target_rank, heap_bases, mask=m), mask=m)
    store(buf + i, tl.load(src + i), cur_rank, target_rank, heap_bases, mask=m)
    get(buf + BLOCK + i, out + 2 * BLOCK + i, cur_rank, target_rank, heap_bases, mask=m)
    put(src + BLOCK + i, buf + 2 * BLOCK + i, cur_rank, target_rank, heap_bases, mask=m)


@triton.jit
def atomic_probe(buf, val, cmp, out, heap_bases, cur_rank, target_rank, BITWISE: tl.constexpr,
                 MINMAX: tl.constexpr, EXCHANGE: tl.constexpr, CAS: tl.constexpr, SEM: tl.constexpr,
                 SCOPE: tl.constexpr, BLOCK: tl.constexpr):
    """Every remote atomic the element type supports, with memory semantics SEM and scope SCOPE.

    add and sub always; and / or / xor with BITWISE, min / max with MINMAX, xchg with EXCHANGE, cas with CAS."""
    i = tl.arange(0, BLOCK)
    m = (i % 3) != 1
    p = buf + i
    v = tl.load(val + i)
    o = out + i * 9
    tl.store(o, atomic_add(p, v, cur_rank, target_rank, heap_bases, mask=m, sem=SEM, scope=SCOPE), mask=m)
    tl.store(o + 1, atomic_sub(p, v, cur_rank, target_rank, heap_bases, mask=m, sem=SEM, scope=SCOPE), mask=m)
    if EXCHANGE:
        tl.store(o + 2, atomic_xchg(p, v, cur_rank, target_rank, heap_bases, mask=m, sem=SEM, scope=SCOPE), mask=m)
    if BITWISE:
        tl.store(o + 3, atomic_and(p, v, cur_rank, target_rank, heap_bases, mask=m, sem=SEM, scope=SCOPE), mask=m)
        tl.store(o + 4, atomic_or(p, v, cur_rank, target_rank, heap_bases, mask=m, sem=SEM, scope=SCOPE), mask=m)
        tl.store(o + 5, atomic_xor(p, v, cur_rank, target_rank, heap_bases, mask=m, sem=SEM, scope=SCOPE), mask=m)
    if MINMAX:
        tl.store(o + 6, atomic_min(p, v, cur_rank, target_rank, heap_bases, mask=m, sem=SEM, scope=SCOPE), mask=m)
        tl.store(o + 7, atomic_max(p, v, cur_rank, target_rank, heap_bases, mask=m, sem=SEM, scope=SCOPE), mask=m)
    if CAS:
        c = tl.load(cmp + i)
        tl.store(o + 8, atomic_cas(p, c, v, cur_rank, target_rank, heap_bases, sem=SEM, scope=SCOPE))


@triton.jit
def remote_probe(buf, heap_bases, cur_rank, target_rank, SCOPE: tl.constexpr, BLOCK: tl.constexpr):
    """Remote accesses only (every address through translate): a load, a store and atomics on target_rank's heap.
    On AMD none may become a buffer instruction, whose 32-bit offset from the argument cannot hold the distance
    between two ranks' heaps (kernels.py forbids them in the assembly)."""
    i = tl.arange(0, BLOCK)
    store(buf + i, load(buf + BLOCK + i, cur_rank, target_rank, heap_bases), cur_rank, target_rank, heap_bases)
    p = buf + 2 * BLOCK + i
    one = tl.full((BLOCK,), 1, tl.int32)
    atomic_add(p, one, cur_rank, target_rank, heap_bases, sem="acq_rel", scope=SCOPE)
    atomic_xchg(p + BLOCK, one, cur_rank, target_rank, heap_bases, sem="release", scope=SCOPE)
    atomic_cas(p + 2 * BLOCK, one - 1, one, cur_rank, target_rank, heap_bases, sem="acquire", scope=SCOPE)


@triton.jit
def flag_probe(flags, errors, out, heap_bases, cur_rank, target_rank, value, max_spins, SCOPE: tl.constexpr):
    """notify, notify_add, wait (remote flag), wait_local and record_error, at scope SCOPE."""
    notify(flags, value, cur_rank, target_rank, heap_bases, SCOPE)
    notify_add(flags + 1, 1, cur_rank, target_rank, heap_bases, SCOPE)
    if not wait(flags, value, cur_rank, target_rank, heap_bases, max_spins, SCOPE):
        record_error(errors, 3, target_rank)
    tl.store(out, wait_local(flags + 1, value, max_spins, SCOPE).to(tl.int32))


@triton.jit
def timer_probe(clock, out, KIND: tl.constexpr):
    """read_timer of timer kind KIND (iris_ops.device.TIMER_*), twice, and the copy-engine fences (TMA paths)."""
    t0 = read_timer(clock, KIND)
    fence_proxy_async_global()
    wait_bulk_stores()
    tl.store(out, read_timer(clock, KIND) - t0)
