"""Device API of the symmetric heap: Triton functions that reach any rank's heap.

Names and argument order follow Iris, so an Iris kernel runs with only its import changed:

    translate(ptr, from_rank, to_rank, heap_bases)
    load(ptr, to_rank, from_rank, heap_bases, mask=None)          # read from_rank's copy
    store(ptr, value, from_rank, to_rank, heap_bases, mask=None)   # write to_rank's copy
    get(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None)   # reads to_rank's copy
    put(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None)
    atomic_{add,sub,xchg,and,or,xor,min,max}(ptr, val, from_rank, to_rank, heap_bases, mask, sem, scope)
    atomic_cas(ptr, cmp, val, from_rank, to_rank, heap_bases, sem, scope)

In every call `ptr` is an address in the calling rank's heap; the function moves it by the
distance between the two ranks' heap bases (`heap_bases[r]` is where rank r's heap is mapped in
this process). Added here, beyond Iris:

    notify(flag_ptr, value, from_rank, to_rank, heap_bases, scope)      release-store of a flag
    notify_add(flag_ptr, inc, from_rank, to_rank, heap_bases, scope)    release-add to a counter
    wait(flag_ptr, value, cur_rank, flag_rank, heap_bases, max_spins, scope) -> reached (bool)
    read_timer(clock_ptr, KIND)                                         per-tile timestamps
    record_error_all(error_ptr, kind, tile, cur_rank, heap_bases, world_size)   the error on every rank
    wait_or_error(..., max_spins, error_ptr, scope), wait_local_or_error(...)   waits that stop on it
    opaque(x)                                                            x, hidden from common-subexpression
                                                                         elimination (recomputed where used)

`wait` spins on acquire loads (no read-modify-write in the loop) until the flag is >= value and
gives up once the device's clock passes its deadline (`max_spins`: the budget `spin_budget(timeout_s)` gives),
returning False: a caller records the timeout in an error word
that the host turns into an exception, so no spin can hang a run. Flags hold epochs (the
iteration number) rather than booleans, so a flag left over from an earlier iteration is always
smaller than the one awaited and never needs a racy reset.

Without a GPU (and with TRITON_INTERPRET unset) importing this module sets TRITON_INTERPRET=1, so that every
kernel of the project, each of which imports this module before it is decorated, runs in Triton's interpreter
on the CPU (iris_ops.env.use_interpreter_without_gpu).
"""

from __future__ import annotations

import math
import time

from streamk_pgas.iris_ops.env import interpreted, use_interpreter_without_gpu

use_interpreter_without_gpu()

import triton  # noqa: E402  (after the interpreter is chosen)
import triton.language as tl  # noqa: E402

# Timer kinds for read_timer.
TIMER_LOGICAL = 0  # interpreter / unknown: a per-heap event counter (orders events, no time unit)
TIMER_GLOBALTIMER = 1  # NVIDIA %globaltimer, nanoseconds
TIMER_MEMREALTIME = 2  # AMD s_memrealtime, ticks of wall_clock_rate


INTERPRETED = interpreted()


def _detect_arch() -> int:
    """0: interpreter or unknown (portable code paths), 1: NVIDIA, 2: AMD."""
    if INTERPRETED:
        return 0
    try:
        import torch

        if not torch.cuda.is_available():
            return 0
        return 2 if getattr(torch.version, "hip", None) else 1
    except Exception:
        return 0


ARCH = _detect_arch()
_ARCH: tl.constexpr = tl.constexpr(ARCH)  # the code paths the device functions compile to (see set_compile_arch)


def arch_code(name: str) -> int:
    """ARCH's code for a GPU named as stream_k.configs.current_arch names it: "sm.." 1 (NVIDIA), "gfx.." 2
    (AMD), anything else ("interpreter", "cpu") 0."""
    return 1 if name.startswith("sm") else 2 if name.startswith("gfx") else 0


def default_timer_kind(arch: int | None = None) -> int:
    """The timer read_timer should use on this process's device, or on a GPU of ARCH code `arch`."""
    return {0: TIMER_LOGICAL, 1: TIMER_GLOBALTIMER, 2: TIMER_MEMREALTIME}[ARCH if arch is None else arch]


def set_compile_arch(arch: int) -> None:
    """Compile the device functions' code paths of ARCH code `arch` (1 NVIDIA, 2 AMD) into every kernel this
    process compiles from now on: an ahead-of-time compile for a GPU the process does not have. ARCH (the
    process's own device, which spin budgets and timers follow) is unchanged, so a process that calls this
    compiles kernels and never launches them. Triton's cache key does not see the value: such a process keeps
    its own cache directory."""
    global _ARCH
    _ARCH = tl.constexpr(arch)


@triton.jit
def translate(ptr, from_rank, to_rank, heap_bases):
    """Address in to_rank's heap of what `ptr` addresses in from_rank's heap.

    The distance between heap bases is added in elements, not by a round trip through an
    integer, so the compiler keeps what it knows of `ptr`'s contiguity and alignment and remote
    accesses stay vectorised. Heap bases are 1 KiB aligned, which `multiple_of` states.

    AMD: Triton turns an access through a pointer argument of a tensor under 2 GiB (the JIT
    specialises it with tt.pointer_range=32) into a buffer instruction whose 32-bit offset counts
    from that argument, so `ptr + delta` would lose the high bits of the heap distance (and a
    negative one), reaching the wrong address. There the address goes through an integer, as Iris
    does: the access stays a global one. The price is what the compiler knew of `ptr`'s contiguity:
    those accesses are not vectorised.

    A block of addresses is cheaper moved as its base: `translate(base, ...) + offsets` keeps one translated address
    per peer live, `translate(base + offsets, ...)` one per element (AMD: a 64-bit integer each), which the op's
    loops over peers (overlap.communication) cannot afford beside a GEMM's registers.
    """
    from_base = tl.load(heap_bases + from_rank)
    to_base = tl.load(heap_bases + to_rank)
    if _ARCH == 2:
        distance = tl.multiple_of((to_base - from_base).to(tl.int64), 1024)
        moved = ptr.to(tl.int64, bitcast=True) + distance
        return moved.to(ptr.dtype, bitcast=True)
    else:
        elem_bytes: tl.constexpr = (ptr.dtype.element_ty.primitive_bitwidth + 7) // 8  # bool: 1 byte
        delta = (to_base - from_base).to(tl.int64) // elem_bytes
        delta = tl.multiple_of(delta, 1024 // elem_bytes)
        return ptr + delta


@triton.jit
def load(pointer, to_rank, from_rank, heap_bases, mask=None):
    """Load from from_rank's heap at the place `pointer` names in to_rank's (the caller's) heap."""
    return tl.load(translate(pointer, to_rank, from_rank, heap_bases), mask=mask)


@triton.jit
def store(pointer, value, from_rank, to_rank, heap_bases, mask=None):
    """Store `value` into to_rank's heap at the place `pointer` names in from_rank's (the caller's) heap."""
    tl.store(translate(pointer, from_rank, to_rank, heap_bases), value, mask=mask)


@triton.jit
def get(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None):
    """Copy to_rank's copy of from_ptr's data into the caller's local to_ptr.

    Called as Iris programs call it, `get(src, dst, cur_rank, target_rank, heap_bases)`: src is
    moved from the caller's (from_rank's) heap to target_rank's, read there, and stored locally.
    """
    data = tl.load(translate(from_ptr, from_rank, to_rank, heap_bases), mask=mask)
    tl.store(to_ptr, data, mask=mask)


@triton.jit
def put(from_ptr, to_ptr, from_rank, to_rank, heap_bases, mask=None):
    """Copy the caller's (from_rank's) local from_ptr into to_rank's heap at to_ptr's place."""
    data = tl.load(from_ptr, mask=mask)
    tl.store(translate(to_ptr, from_rank, to_rank, heap_bases), data, mask=mask)


@triton.jit
def atomic_add(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None):
    return tl.atomic_add(translate(pointer, from_rank, to_rank, heap_bases), val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_sub(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None):
    # tl.atomic_add of the negation: the same instruction every backend has.
    return tl.atomic_add(translate(pointer, from_rank, to_rank, heap_bases), -val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_cas(pointer, cmp, val, from_rank, to_rank, heap_bases, sem=None, scope=None):
    return tl.atomic_cas(translate(pointer, from_rank, to_rank, heap_bases), cmp, val, sem=sem, scope=scope)


@triton.jit
def atomic_xchg(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None):
    return tl.atomic_xchg(translate(pointer, from_rank, to_rank, heap_bases), val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_and(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None):
    return tl.atomic_and(translate(pointer, from_rank, to_rank, heap_bases), val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_or(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None):
    return tl.atomic_or(translate(pointer, from_rank, to_rank, heap_bases), val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_xor(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None):
    return tl.atomic_xor(translate(pointer, from_rank, to_rank, heap_bases), val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_min(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None):
    return tl.atomic_min(translate(pointer, from_rank, to_rank, heap_bases), val, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_max(pointer, val, from_rank, to_rank, heap_bases, mask=None, sem=None, scope=None):
    return tl.atomic_max(translate(pointer, from_rank, to_rank, heap_bases), val, mask=mask, sem=sem, scope=scope)


# ----------------------------------------------------------------------------------------------
# Flags


# `scope` of the flag functions: "gpu" (waiter and writer on one GPU) or "sys" (across GPUs, the
# default: None means "sys"). String defaults are not used because triton 3.6 rejects them.


@triton.jit
def notify(flag_ptr, value, from_rank, to_rank, heap_bases, scope: tl.constexpr = None):
    """Publish `value` in to_rank's flag with release semantics.

    Everything this program stored before the call is visible to a reader that sees `value`.
    The barrier first makes the whole program's stores precede the one thread that writes.
    """
    tl.debug_barrier()
    ptr = translate(flag_ptr, from_rank, to_rank, heap_bases)
    if scope == "gpu":
        tl.atomic_xchg(ptr, value, sem="release", scope="gpu")
    else:
        tl.atomic_xchg(ptr, value, sem="release", scope="sys")


@triton.jit
def notify_add(flag_ptr, inc, from_rank, to_rank, heap_bases, scope: tl.constexpr = None):
    """Add `inc` to to_rank's counter with release semantics (many producers, one waiter)."""
    tl.debug_barrier()
    ptr = translate(flag_ptr, from_rank, to_rank, heap_bases)
    if scope == "gpu":
        tl.atomic_add(ptr, inc, sem="release", scope="gpu")
    else:
        tl.atomic_add(ptr, inc, sem="release", scope="sys")


@triton.jit
def fence_sys():
    """NVIDIA: `fence.acq_rel.sys`, this thread's earlier accesses ordered before its later ones at system scope
    (what a release atomic does before its write, once, for several relaxed writes that follow). Elsewhere and in
    the interpreter nothing: callers release each write there (notify_ranks)."""
    if _ARCH == 1:
        tl.inline_asm_elementwise("fence.acq_rel.sys; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False,
                                  pack=1)


@triton.jit
def notify_ranks(flag_ptr, value, cur_rank, heap_bases, world_size, FIRST: tl.constexpr):
    """Publish `value` in the flag of ranks (cur_rank + i) % world_size for i = FIRST .. world_size - 1 (FIRST 0:
    every rank, this one included; 1: the peers) with release semantics at system scope: everything this program
    stored before the call is visible to a reader that sees `value`. NVIDIA: one system-scope fence, then relaxed
    writes (a release atomic per rank would fence once per rank); elsewhere a release atomic per rank."""
    tl.debug_barrier()
    if _ARCH == 1:
        fence_sys()
        for i in range(FIRST, world_size):
            ptr = translate(flag_ptr, cur_rank, (cur_rank + i) % world_size, heap_bases)
            tl.atomic_xchg(ptr, value, sem="relaxed", scope="sys")
    else:
        for i in range(FIRST, world_size):
            ptr = translate(flag_ptr, cur_rank, (cur_rank + i) % world_size, heap_bases)
            tl.atomic_xchg(ptr, value, sem="release", scope="sys")


@triton.jit
def count_release(counter_ptr, SYS: tl.constexpr):
    """Add 1 to a counter in this GPU's memory (acquire and release) and return its old value. SYS: the program
    also wrote to peers, and those writes are released with it at system scope (NVIDIA: one system-scope fence,
    then the counter at GPU scope, so programs counting together do not serialise on system-scope atomics;
    elsewhere the atomic itself at system scope)."""
    if SYS:
        if _ARCH == 1:
            fence_sys()
            n = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
        else:
            n = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="sys")
    else:
        n = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
    return n


@triton.jit
def _acquire_load(ptr, scope: tl.constexpr):
    if _ARCH == 1:
        if scope == "gpu":
            v = tl.inline_asm_elementwise(
                "ld.acquire.gpu.global.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1
            )
        else:
            v = tl.inline_asm_elementwise(
                "ld.acquire.sys.global.b32 $0, [$1];", "=r,l", [ptr], dtype=tl.int32, is_pure=False, pack=1
            )
    else:
        v = tl.load(ptr, volatile=True)
    return v


@triton.jit
def fence_proxy_async_global():
    """NVIDIA: order this thread's earlier global accesses (an acquire, say) before its later copy-engine
    (TMA, async proxy) accesses to global memory. No-op elsewhere and in the interpreter."""
    if _ARCH == 1:
        tl.inline_asm_elementwise("fence.proxy.async.global; mov.u32 $0, 0;", "=r", [], dtype=tl.int32,
                                  is_pure=False, pack=1)


@triton.jit
def wait_bulk_stores():
    """NVIDIA: wait until this thread's copy-engine (TMA) stores are complete in global memory (the
    `wait_group` without `.read`, which would only wait until shared memory was read), then fence them
    towards later generic accesses (a release, say). No-op elsewhere and in the interpreter."""
    if _ARCH == 1:
        tl.inline_asm_elementwise("cp.async.bulk.wait_group 0; fence.proxy.async.global; mov.u32 $0, 0;", "=r",
                                  [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def opaque(x):
    """int32 x, as a value the compiler cannot prove equal to x: what the caller derives from the result
    (addresses, indices) is computed there, not shared with the equal values derived from x earlier in the
    kernel, which the compiler would otherwise keep in registers over all the code in between. NVIDIA: a register
    move in PTX; elsewhere and in the interpreter x itself."""
    if _ARCH == 1:
        return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    else:
        return x


@triton.jit
def _acquire_rmw(ptr, scope: tl.constexpr):
    if scope == "gpu":
        v = tl.atomic_add(ptr, 0, sem="acquire", scope="gpu")
    else:
        v = tl.atomic_add(ptr, 0, sem="acquire", scope="sys")
    return v


POLL_PAUSE_S = 1e-4  # the interpreter's pause between two polls of a wait

# A wait gives up on the device's own clock, not after a count of polls: a poll's cost varies too much for a count
# to mean a time (0.2 us for a local flag on a GPU, 1-3 us for a peer's over NVLink, 0.5-1.2 ms in the
# interpreter). The clock is read in units of 2^WAIT_UNIT_SHIFT ticks, as an int32 that wraps around (a wait
# compares differences, which stay right for any budget below 2^31 units), so a wait keeps one 32-bit deadline
# where it kept a 32-bit poll count. A unit is 65.5 us of NVIDIA's %globaltimer (ns) and of the interpreter's
# time.monotonic_ns, 655 us of AMD's s_memrealtime (100 MHz).
WAIT_UNIT_SHIFT = 16
_WAIT_UNIT_SHIFT: tl.constexpr = tl.constexpr(WAIT_UNIT_SHIFT)
_INTERPRETED: tl.constexpr = tl.constexpr(INTERPRETED)
CLOCK_HZ = {0: 1e9, 1: 1e9, 2: 1e8}  # ARCH -> ticks per second of the clock `_now_units` reads


if INTERPRETED:
    _CLOCK_ORIGIN_NS = time.monotonic_ns()

    def _poll_pause() -> None:
        """Between two polls of a wait in the interpreter: give the CPU away for a moment. Ranks are processes
        that often outnumber the cores (mpirun --oversubscribe), and a rank spinning on a flag would otherwise
        take CPU time from the peer that is to set it."""
        time.sleep(POLL_PAUSE_S)

    def _now_units() -> int:
        """The interpreter's clock in wait units: the host's monotonic clock since this module was imported."""
        return (time.monotonic_ns() - _CLOCK_ORIGIN_NS) >> WAIT_UNIT_SHIFT
else:
    @triton.jit
    def _poll_pause():
        """Compiled: nothing (the hardware scheduler runs other programs while one polls)."""
        pass

    @triton.jit
    def _now_units():
        """The device clock in wait units (int32, wrapping) where `_poll` reads it apart from the flag: AMD's
        s_memrealtime. A build for ARCH 0 outside the interpreter has no clock and is never launched (it is made
        only where there is no GPU): `_deadline` ignores it."""
        if _ARCH == 2:
            t = tl.inline_asm_elementwise("s_memrealtime $0\ns_waitcnt lgkmcnt(0)", "=s", [], dtype=tl.int64,
                                          is_pure=False, pack=1)
            u = (t >> _WAIT_UNIT_SHIFT).to(tl.int32)
        else:
            u = tl.full((), 0, tl.int32)
        return u


@triton.jit
def _poll(ptr, scope: tl.constexpr):
    """(the int32 at ptr, read with acquire semantics; the clock in wait units). NVIDIA: the load and %globaltimer
    in one asm block, so a poll stays one asm statement in the wait loop (two blocks there made two world-8 fused
    kernels spill on sm_90)."""
    if _ARCH == 1:
        if scope == "gpu":
            v, t = tl.inline_asm_elementwise(
                "{ .reg .u64 t; ld.acquire.gpu.global.b32 $0, [$2]; mov.u64 t, %globaltimer; shr.u64 t, t, 16; "
                "cvt.u32.u64 $1, t; }", "=r,=r,l", [ptr], dtype=(tl.int32, tl.int32), is_pure=False, pack=1)
        else:
            v, t = tl.inline_asm_elementwise(
                "{ .reg .u64 t; ld.acquire.sys.global.b32 $0, [$2]; mov.u64 t, %globaltimer; shr.u64 t, t, 16; "
                "cvt.u32.u64 $1, t; }", "=r,=r,l", [ptr], dtype=(tl.int32, tl.int32), is_pure=False, pack=1)
    else:
        v = _acquire_load(ptr, scope)
        t = _now_units()
    return v, t


@triton.jit
def _deadline(now, budget):
    """The clock (wait units, int32, wrapping) at which a wait that started at `now` with `budget` units
    (spin_budget) gives up: a wait polls while `now - deadline < 0`."""
    if _INTERPRETED or _ARCH != 0:
        at = now + budget
    else:  # a build with no clock (made where there is no GPU, never launched): give up after the first poll
        at = now - 1
    return at


@triton.jit
def wait(flag_ptr, value, cur_rank, flag_rank, heap_bases, max_spins, scope: tl.constexpr = None):
    """Spin until flag_rank's int32 flag is >= value; False if it was not seen before the wait's time ran out
    (`max_spins`: the budget spin_budget(timeout_s) gives).

    NVIDIA polls with `ld.acquire`; elsewhere volatile loads poll and one acquire atomic that
    reads the flag after the loop orders what follows (it reads the value the loop saw or a later one).
    """
    ptr = translate(flag_ptr, cur_rank, flag_rank, heap_bases)
    seen, now = _poll(ptr, scope)
    deadline = _deadline(now, max_spins)
    while (seen < value) & ((now - deadline) < 0):
        _poll_pause()
        seen, now = _poll(ptr, scope)
    if _ARCH != 1:
        seen = _acquire_rmw(ptr, scope)
    return seen >= value


@triton.jit
def wait_local(flag_ptr, value, max_spins, scope: tl.constexpr = None):
    """`wait` on a flag in the caller's own memory (no translation)."""
    seen, now = _poll(flag_ptr, scope)
    deadline = _deadline(now, max_spins)
    while (seen < value) & ((now - deadline) < 0):
        _poll_pause()
        seen, now = _poll(flag_ptr, scope)
    if _ARCH != 1:
        seen = _acquire_rmw(flag_ptr, scope)
    return seen >= value


# Error words: a kernel whose wait times out records `kind * ERROR_KIND_SCALE + tile + 1` in an
# int32 error word (the first one wins) and moves on; the host raises with decode_error's text.
ERROR_KIND_SCALE = 1 << 24
ERR_STREAMK_FIXUP = 1  # a Stream-K tile owner timed out waiting for another program's partial sum
ERR_TILE_READY = 2  # a communication tile timed out waiting for a GEMM tile-ready flag
ERR_PEER_READY = 3  # a communication tile timed out waiting for a peer's flag
ERR_A_ROWS = 4  # a GEMM tile timed out waiting for rows of A gathered from a peer (all_gather_gemm)
_ERROR_TEXT = {
    ERR_STREAMK_FIXUP: "Stream-K fix-up timed out waiting for a partial tile from another program",
    ERR_TILE_READY: "communication timed out waiting for the GEMM to mark a tile ready",
    ERR_PEER_READY: "communication timed out waiting for a peer rank's tile flag",
    ERR_A_ROWS: "the GEMM timed out waiting for rows of A from a peer (all-gather)",
}


def decode_error(code: int) -> str:
    """Words for an error word's value (0: no error)."""
    if code == 0:
        return "no error"
    kind, tile = divmod(int(code), ERROR_KIND_SCALE)
    return f"{_ERROR_TEXT.get(kind, f'error kind {kind}')} (tile {tile - 1})"


@triton.jit
def record_error(error_ptr, kind, tile_id):
    """Keep the first error (kind, tile) in the int32 word at error_ptr for the host to raise."""
    tl.atomic_cas(error_ptr, 0, kind * 16777216 + tile_id + 1, sem="relaxed", scope="gpu")


# The collective error state: ERROR_WORDS int32 words on the symmetric heap, at the same offset on every
# rank: [0] the first error's code (as record_error writes it), [1] 1 + the rank that recorded it (0 when
# unknown: written by record_error, or not yet visible). record_error_all writes the error into every rank's
# words, so every rank's host check raises, and the waits below give up at once on any rank once its word
# is set: a step that failed anywhere fails everywhere within one timeout, and steps queued behind it
# drain without waiting. The host side is iris_ops.error_state.
ERROR_WORDS = 2


@triton.jit
def record_error_all(error_ptr, kind, tile_id, cur_rank, heap_bases, world_size):
    """Record the error (kind, tile) in every rank's error words (error_ptr: this rank's copy, on the heap).

    Each rank's word keeps the first error it received (compare-and-swap from 0, system scope, so peers'
    GPUs and hosts see it); where this call's error is the first, the origin word gets 1 + cur_rank.
    The caller's own word is written first. Returns nothing; safe to call from many programs at once.
    """
    code = kind * 16777216 + tile_id + 1
    for i in range(0, world_size):
        target = (cur_rank + i) % world_size
        word = translate(error_ptr, cur_rank, target, heap_bases)
        old = tl.atomic_cas(word, 0, code, sem="release", scope="sys")
        if old == 0:
            tl.atomic_xchg(word + 1, cur_rank + 1, sem="release", scope="sys")


@triton.jit
def wait_or_error(flag_ptr, value, cur_rank, flag_rank, heap_bases, max_spins, error_ptr,
                  scope: tl.constexpr = None):
    """`wait` that also gives up as soon as this rank's error word (error_ptr, in the caller's own heap) is
    non-zero, i.e. once any rank recorded an error with record_error_all. True only if the flag was reached:
    on False the caller records its own error (record_error_all keeps the first one) and moves on."""
    return wait_local_or_error(translate(flag_ptr, cur_rank, flag_rank, heap_bases), value, max_spins, error_ptr,
                               scope)


@triton.jit
def wait_local_or_error(flag_ptr, value, max_spins, error_ptr, scope: tl.constexpr = None):
    """`wait_local` (a flag in the caller's own memory) that also gives up once the error word is non-zero."""
    seen, now = _poll(flag_ptr, scope)
    deadline = _deadline(now, max_spins)
    err = tl.load(error_ptr, volatile=True)
    while (seen < value) & ((now - deadline) < 0) & (err == 0):
        _poll_pause()
        seen, now = _poll(flag_ptr, scope)
        err = tl.load(error_ptr, volatile=True)
    if _ARCH != 1:
        seen = _acquire_rmw(flag_ptr, scope)
    return seen >= value


# A wait for a run of consecutive words (a row block's chunks of A, say) polls them together: lane i of a vector of
# RANGE_LANES reads word i, so one poll costs one load's latency where a wait per word costs one per word.
RANGE_LANES = 32
_RANGE_LANES: tl.constexpr = tl.constexpr(RANGE_LANES)


@triton.jit
def _range_least(ptr, n, scope: tl.constexpr):
    """The least of the n >= 1 int32 words ptr[0 .. n - 1], each read with acquire semantics by its own lane
    (NVIDIA; elsewhere a volatile load, which wait_range_or_error then orders); lanes past the last word read it
    again."""
    lanes = tl.arange(0, _RANGE_LANES)
    least = tl.min(_acquire_load(ptr + tl.minimum(lanes, n - 1), scope), axis=0)
    for c in range(_RANGE_LANES, n, _RANGE_LANES):
        least = tl.minimum(least, tl.min(_acquire_load(ptr + tl.minimum(c + lanes, n - 1), scope), axis=0))
    return least


@triton.jit
def _clock_units():
    """The wait clock (`_poll`'s second value) read on its own."""
    if _ARCH == 1:
        t = tl.inline_asm_elementwise(
            "{ .reg .u64 t; mov.u64 t, %globaltimer; shr.u64 t, t, 16; cvt.u32.u64 $0, t; }", "=r", [],
            dtype=tl.int32, is_pure=False, pack=1)
    else:
        t = _now_units()
    return t


@triton.jit
def wait_range_or_error(ptr, n, value, max_spins, error_ptr, scope: tl.constexpr = None):
    """`wait_local_or_error` on the n >= 1 consecutive words ptr[0 .. n - 1] of the caller's own memory at once:
    True once every one is >= value, False if the time ran out or the error word was set first. The error word is
    read only while waiting. Every thread of the program calls it: it ends with a barrier of the program's threads,
    which orders every thread's later accesses after the lane that acquired each word (elsewhere than NVIDIA an
    acquire read-modify-write of each word does the acquiring)."""
    least = _range_least(ptr, n, scope)
    if least < value:
        now = _clock_units()
        deadline = _deadline(now, max_spins)
        err = tl.load(error_ptr, volatile=True)
        while (least < value) & ((now - deadline) < 0) & (err == 0):
            _poll_pause()
            least = _range_least(ptr, n, scope)
            now = _clock_units()
            err = tl.load(error_ptr, volatile=True)
    if least >= value:
        if _ARCH != 1:
            for i in range(0, n):
                _acquire_rmw(ptr + i, scope)
    tl.debug_barrier()
    return least >= value


# ----------------------------------------------------------------------------------------------
# Timer


@triton.jit
def read_timer(clock_ptr, KIND: tl.constexpr):
    """A timestamp (int64). KIND: TIMER_GLOBALTIMER (ns, NVIDIA), TIMER_MEMREALTIME (AMD ticks),
    TIMER_LOGICAL (an event counter at clock_ptr: the interpreter has no clock, so it orders events)."""
    if KIND == 1:
        t = tl.inline_asm_elementwise(
            "mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1
        )
    elif KIND == 2:
        t = tl.inline_asm_elementwise(
            "s_memrealtime $0\ns_waitcnt lgkmcnt(0)", "=s", [], dtype=tl.int64, is_pure=False, pack=1
        )
    else:
        t = tl.atomic_add(clock_ptr, 1).to(tl.int64)
    return t


def spin_budget(timeout_s: float) -> int:
    """The budget of a `wait` that gives up after timeout_s on this process's device: units of 2^WAIT_UNIT_SHIFT
    ticks of its clock (`_now`), rounded up, at least one."""
    units = math.ceil(timeout_s * CLOCK_HZ[ARCH] / (1 << WAIT_UNIT_SHIFT))
    return int(min(2**31 - 1, max(1, units)))
