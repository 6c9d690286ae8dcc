"""A kernel launch bound once: the arguments, grid and options of one Triton kernel, launched many times.

Triton's `kernel[grid](**kwargs)` binds and specialises every argument, looks the compiled kernel
up, checks its globals, resolves each tensor's pointer with a driver call and encodes each tensor
descriptor, on every call: tens of microseconds for the ~50-argument kernels here. A model calls
the same step with the same buffers again and again, so `BoundLaunch` does all of that once:

- the first call goes through Triton (compiling if needed) and keeps the compiled kernel;
- later calls hand the compiled kernel's launcher the same arguments, with tensors already turned
  into device addresses and tensor descriptors already encoded: one C call (a few microseconds).

Launch hooks (a profiler's `triton.knobs.runtime.launch_enter_hook` / `launch_exit_hook`) are called
with the launch's metadata, as Triton's own launch calls them. The fast path needs Triton's NVIDIA
launcher layout (triton 3.x: `CompiledKernel.run` is a `CudaLauncher`); anywhere else (AMD, the
interpreter, scratch memory per launch, STREAMK_PGAS_FAST_LAUNCH=0) every call goes through
`kernel[grid](...)`, which is always right.
The buffers behind the arguments must outlive the binding and must not move (the op owns them); a caller's own
buffers may be released once the launch is bound (`BoundLaunch.release`) and the launch kept for the next
buffers at the same addresses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from streamk_pgas.iris_ops.env import flag_from_env, interpreted

_CHECKED: set[tuple[str, frozenset[str]]] = set()


def check_arguments(kernel: Any, args: dict[str, Any]) -> None:
    """Every parameter named and none left over. Triton's interpreter ignores an unknown keyword that the
    compiled launch rejects, so the CPU runs check here what the GPU would (once per kernel and name set)."""
    key = (kernel.fn.__name__, frozenset(args))
    if key in _CHECKED:
        return
    names = list(kernel.arg_names)
    unknown = sorted(set(args) - set(names))
    missing = [n for n in names if n not in args]
    if unknown or missing:
        raise TypeError(f"{kernel.fn.__name__}: unknown arguments {unknown}, missing {missing}")
    _CHECKED.add(key)


FAST_LAUNCH_ENV = "STREAMK_PGAS_FAST_LAUNCH"  # 0: every launch through Triton's launcher; 1 (default): bound


def fast_launch_enabled() -> bool:
    """Whether launches go through the bound launcher (never in the interpreter); a bad value of the variable
    raises iris_ops.errors.ConfigError naming it."""
    return flag_from_env(FAST_LAUNCH_ENV, True) and not interpreted()


class BoundLaunch:
    """`kernel[(programs,)](**args, **options)`, bound once; call it with a CUDA stream handle or None."""

    def __init__(self, kernel: Any, programs: int, args: dict[str, Any], options: dict[str, Any]) -> None:
        check_arguments(kernel, args)
        self.kernel = kernel
        self.programs = programs
        self.args = args
        self.options = options
        self.compiled: Any = None
        self._fast: Callable[[int], None] | None = None
        self.fast = False  # True once launches go through the bound launcher
        self.fast_refused: str | None = None  # why the bound launcher was not used, if it was not
        self._device = 0
        self._flat: list[Any] = []  # what the bound launcher is handed (device addresses, encoded descriptors)

    @property
    def name(self) -> str:
        return self.kernel.fn.__name__

    def __call__(self, stream: Any = None) -> None:
        """Launch on `stream` (a torch.cuda.Stream; None: the current stream)."""
        if self._fast is not None:
            handle = stream.cuda_stream if stream is not None else torch._C._cuda_getCurrentRawStream(self._device)
            self._fast(handle)
            return
        if stream is not None:
            with torch.cuda.stream(stream):
                compiled = self.kernel[(self.programs,)](**self.args, **self.options)
        else:
            compiled = self.kernel[(self.programs,)](**self.args, **self.options)
        if self.compiled is None and compiled is not None and hasattr(compiled, "metadata"):
            self.compiled = compiled
            if fast_launch_enabled():
                self._fast, self.fast_refused, self._flat = _bind_fast(compiled, self.kernel, self.programs, self.args)
                self.fast = self._fast is not None
                self._device = torch.cuda.current_device()  # the device the bound buffers live on
            else:
                self.fast_refused = "STREAMK_PGAS_FAST_LAUNCH=0 or the interpreter"


    def release(self, *tensors: Any) -> bool:
        """Let go of `tensors` (a caller's buffers, and tensor descriptors over them) once the launch is bound: the
        bound launcher is handed only their addresses, so their memory may be freed and given to the caller's next
        buffers while this launch is kept for whichever buffers come at the same addresses, shapes and strides (its
        keeper looks it up by those). False, keeping them, where calls still go through Triton with the arguments
        themselves (not bound yet, the interpreter, AMD) or the bound launcher is handed a tensor itself."""
        def theirs(v: Any) -> bool:
            return any(v is t or getattr(v, "base", None) is t for t in tensors)

        if self._fast is None or any(isinstance(x, torch.Tensor) and theirs(x) for x in self._flat):
            return False
        for name, value in self.args.items():  # in place: the launch hooks read the arguments from this dict
            if theirs(value):
                self.args[name] = None
        return True


def _bind_fast(compiled: Any, kernel: Any, programs: int, args: dict[str, Any]
               ) -> tuple[Callable[[int], None] | None, str | None, list[Any]]:
    """The launcher of `compiled` with every argument resolved and the arguments it is handed, or (None, why, [])
    where its layout is not the known one."""
    try:
        import triton

        launcher = compiled.run
        scratch = {f: getattr(launcher, f, 0) for f in ("global_scratch_size", "profile_scratch_size")}
        if any(scratch.values()):
            return None, f"the kernel needs scratch memory per launch ({scratch})", []
        raw = _raw_launch(launcher)
        if raw is None:
            return None, f"unknown launcher layout ({type(launcher).__name__}.launch = {launcher.launch!r})", []
        from triton.backends.nvidia.driver import make_tensordesc_arg

        compiled._init_handles()
        signature = list(compiled.src.signature.values())
        meta = list(getattr(compiled.metadata, "tensordesc_meta", None) or [])
        flat = flatten_args(kernel.arg_names, signature, args, meta, make_tensordesc_arg)
        grid = (programs, 1, 1)
        flags = (compiled.function, bool(launcher.launch_cooperative_grid), bool(launcher.launch_pdl), None, None,
                 compiled.packed_metadata)
        plain = (*flags, None, None, None, *flat)
        runtime = triton.knobs.runtime
    except Exception as exc:  # an unknown launcher layout: the plain path stays right
        return None, f"{type(exc).__name__}: {exc}", []

    def launch(stream: int) -> None:
        enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
        if not _active(enter) and not _active(leave):
            raw(*grid, stream, *plain)
        else:  # a profiler's hooks: called with the launch's metadata, as Triton's own launch does (the arguments
            # as they are now: a released buffer is None, its address still in `flat`)
            meta = compiled.launch_metadata(grid, stream, *(args[name] for name in kernel.arg_names))
            raw(*grid, stream, *flags, meta, enter, leave, *flat)

    return launch, None, flat


def flatten_args(names: list[str], signature: list[Any], args: dict[str, Any], tensordesc_meta: list[Any],
                 make_tensordesc_arg: Callable[[Any, Any], list[Any]]) -> list[Any]:
    """The kernel's arguments in the order and form its compiled launcher parses them: a tensor as its device
    address, a top-level tensor descriptor expanded into its launcher arguments (make_tensordesc_arg), a tuple
    argument as a nested tuple of the same (the launcher's "(...)" format), anything else (scalars, constexpr
    values, None) as it is."""
    flat: list[Any] = []
    desc_i = 0
    for name, sig in zip(names, signature):
        value = args[name]
        if isinstance(sig, str) and sig.startswith("tensordesc"):
            flat.extend(make_tensordesc_arg(value, tensordesc_meta[desc_i] if tensordesc_meta else None))
            desc_i += 1
        else:
            flat.append(_resolved(value, sig))
    return flat


def _resolved(value: Any, sig: Any) -> Any:
    """One argument as the launcher takes it (a tuple's elements likewise, nested)."""
    if isinstance(sig, tuple):
        return tuple(_resolved(v, s) for v, s in zip(value, sig))
    if isinstance(value, torch.Tensor):
        return value.data_ptr()
    return value


def _active(hook: Any) -> bool:
    """A hook that does something: not None, and not an empty chain (triton 3.6 installs empty HookChains)."""
    return hook is not None and bool(getattr(hook, "calls", True))


def _raw_launch(launcher: Any) -> Callable[..., Any] | None:
    """The compiled C `launch` inside a CudaLauncher (unwrapping the tensor-descriptor wrapper)."""
    fn = getattr(launcher, "launch", None)
    if fn is None:
        return None
    if type(fn).__name__ == "builtin_function_or_method":
        return fn
    for cell in getattr(fn, "__closure__", None) or ():
        inner = cell.cell_contents
        if type(inner).__name__ == "builtin_function_or_method" and getattr(inner, "__name__", "") == "launch":
            return inner
    return None
