"""Simulated CUDA: run a program on a CPU-only machine as if a GPU were present.

    python tests/simulated_cuda.py PROGRAM [--record OUT.json] [--names a,b]

A CPU-CI *proxy* for the real GPU run (scripts/verify_cuda.sh), never a substitute:
``torch.cuda.is_available()`` answers True, runtime calls that raise on a CPU build
(``synchronize``, ``Event``, ``Stream``, ``set_device`` ...) are stubbed, and a
``TorchFunctionMode`` plus wrappers of ``nn.Module.to``/``cuda``/``cpu`` redirect every
CUDA placement to the CPU and record it.

Every tensor also has a *virtual device*: a tensor that would live on the GPU carries
``_devlint_cuda = True`` (everything else is on the host). It is set by ``.cuda()``,
``.to(cuda | 0 | "cuda:0" | other_gpu_tensor)``, ``device=cuda`` factories,
``Module.to/cuda`` (parameters, buffers and their gradients, in place) and
``torch.load``/``torch.jit.load`` with a CUDA ``map_location``; it is cleared (on a copy,
as a GPU would copy) by ``.cpu()``/``.to("cpu")``. Results of an op are on the GPU when
one of its tensor inputs is; a gradient, ``.data`` and views follow their tensor. A GPU
tensor's ``.device`` answers ``cuda:0``, ``.is_cuda`` True, ``.get_device()`` 0.

An op that a GPU would refuse raises here too, with a message starting "simulated CUDA:":
GPU and host tensors mixed in one op (``Expected all tensors to be on the same device``;
0-dim host tensors are scalars and allowed, as are host index tensors in indexing,
``copy_`` and the moves themselves), so a GPU module fed host tensors fails; a GPU index
into a host tensor; ``.numpy()``/``np.asarray`` of a GPU tensor (``can't convert cuda:0
device type tensor to numpy``). Limits: see docs/verification.md.
"""

from __future__ import annotations

import contextlib
import json
import time
import types
from collections import Counter

import torch
from torch.overrides import TorchFunctionMode

RECORD: Counter = Counter()
CPU = torch.device("cpu")
CUDA0 = torch.device("cuda", 0)
TAG = "_devlint_cuda"


class SimulatedDeviceError(RuntimeError):
    """What a real GPU raises for tensors on two devices in one op."""


class SimulatedNumpyError(TypeError):
    """What a real GPU raises for ``.numpy()`` of a CUDA tensor (a TypeError there too)."""


def _is_cuda(v) -> bool:
    if isinstance(v, str):
        return v.startswith("cuda")
    if isinstance(v, torch.device):
        return v.type == "cuda"
    return isinstance(v, int) and not isinstance(v, bool)  # `.to(0)`: a CUDA index


def _is_host(v) -> bool:
    if isinstance(v, str):
        return v.startswith("cpu")
    return isinstance(v, torch.device) and v.type == "cpu"


def on_gpu(t) -> bool:
    """Whether ``t`` (a tensor) would live on the GPU."""
    return getattr(t, TAG, False) is True


def _set(value, cuda: bool):
    try:
        if cuda:
            object.__setattr__(value, TAG, True)
        elif value.__dict__.get(TAG):
            object.__delattr__(value, TAG)
    except Exception:  # noqa: BLE001 - some tensor subclasses refuse attributes
        pass
    return value


def _tag(value):
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        _set(value, True)
    return value


def _walk(value, fn, depth=0):
    """Apply ``fn`` to every tensor (and Module) in a loaded object."""
    if depth > 6:
        return
    if isinstance(value, torch.Tensor):
        fn(value)
    elif isinstance(value, torch.nn.Module):
        _place_module(value, fn is _tag)
    elif isinstance(value, dict):
        for v in value.values():
            _walk(v, fn, depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _walk(v, fn, depth + 1)


def _move_module(m, cuda: bool):
    """``Module.to/cuda/cpu``: the module's own ``_apply`` (overrides that move extra
    tensors included) swaps in aliases placed on the GPU (or the host): parameters keep
    their objects (``param.data = moved``), buffers are new tensors, gradients move too."""

    def fn(t):
        try:
            out = torch.Tensor.detach(t)
        except Exception:  # noqa: BLE001 - e.g. an uninitialized (lazy) parameter
            out = t
        return _set(out, cuda)

    m._apply(fn)
    _set(m, cuda)


def _place_module(m, cuda: bool):
    """``m`` and everything it holds now live on the GPU (or the host), in place: a move
    keeps the Parameter objects (``param.data = moved``), and their gradients move too."""
    _set(m, cuda)
    for t in (*m.parameters(), *m.buffers()):
        _set(t, cuda)
        g = t.grad if t.requires_grad else None
        if g is not None:
            _set(g, cuda)


# ---- the mode ----------------------------------------------------------------------------

# Ops where tensors on two devices are legitimate on a GPU: the moves and copies
# themselves, indexing (host index tensors), ops reading only a size or dtype, autograd.
_NO_CHECK = frozenset({
    "to", "cuda", "cpu", "type_as", "copy_", "__getitem__", "__setitem__", "index_put_",
    "index_put", "_index_put_impl_", "expand_as", "view_as", "reshape_as", "is_same_size",
    "broadcast_tensors", "result_type", "can_cast", "tensor", "as_tensor", "asarray",
    "__deepcopy__", "__reduce_ex__", "__repr__", "__str__", "__format__", "set_", "grad",
    "backward", "_make_subclass", "new_tensor", "new_zeros", "new_ones", "new_empty",
    "new_full", "new_empty_strided", "tensor_split", "size", "dim", "numel",
    "_has_compatible_shallow_copy_type",
})
# Ops whose integer length/size arguments live on the host by design (PackedSequence
# batch sizes, CTC lengths).
_HOST_INTS_OK = frozenset({
    "lstm", "gru", "rnn_tanh", "rnn_relu", "_pack_padded_sequence", "_pad_packed_sequence",
    "ctc_loss", "repeat_interleave",
})
# Results placed like the first argument (never "any input on the GPU").
_FOLLOW_SELF = frozenset({
    "expand_as", "view_as", "reshape_as", "__getitem__", "new_tensor", "new_zeros",
    "new_ones", "new_empty", "new_full", "new_empty_strided", "copy_", "index_put_",
    "index_put",
})
_INT_DTYPES = (torch.int64, torch.int32)


def _tensors(values):
    for v in values:
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            for w in v:
                if isinstance(w, torch.Tensor):
                    yield w


def _mismatch(name, a_gpu, a_host) -> SimulatedDeviceError:
    return SimulatedDeviceError(
        "simulated CUDA: Expected all tensors to be on the same device, but found at least "
        f"two devices, cuda:0 and cpu! (in {name}: a GPU tensor of shape {tuple(a_gpu.shape)} "
        f"and a host tensor of shape {tuple(a_host.shape)})")


def _numpy_error() -> SimulatedNumpyError:
    return SimulatedNumpyError(
        "simulated CUDA: can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() "
        "to copy the tensor to host memory first.")


def _placed(out, cuda: bool, inputs):
    """``out`` on the GPU (or host); an input returned as is (already on the CPU here) is
    copied first, as the move would copy on a GPU."""
    if isinstance(out, torch.Tensor):
        if on_gpu(out) != cuda:
            if any(out is i for i in inputs):
                out = out.clone()
            _set(out, cuda)
        return out
    if isinstance(out, tuple) and not hasattr(out, "_fields"):
        return tuple(_placed(o, cuda, inputs) for o in out)
    if isinstance(out, list):
        return [_placed(o, cuda, inputs) for o in out]
    return out


def _tag_new(out, inputs):
    """Results of an op with a GPU input live on the GPU (inputs returned as is keep
    their place: in-place ops)."""
    if isinstance(out, torch.Tensor):
        if not on_gpu(out) and not any(out is i for i in inputs):
            _set(out, True)
    elif isinstance(out, (list, tuple)):
        for o in out:
            _tag_new(o, inputs)


class SimulatedCuda(TorchFunctionMode):
    """Redirects CUDA placements to the CPU, tracks each tensor's virtual device, and
    raises where a GPU would refuse to mix devices."""

    quiet = 0  # inside a Module move: do not record the per-tensor moves

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = dict(kwargs or {}) if kwargs else {}
        name = getattr(func, "__name__", "")
        if name == "__get__":
            return self._get(func, args)
        if name == "__set__":
            out = func(*args, **kwargs)
            if len(args) == 2 and getattr(func.__self__, "__name__", "") == "data":
                _set(args[0], on_gpu(args[1]))  # `p.data = moved` moves the Parameter p
            return out
        if kwargs.get("pin_memory"):
            kwargs["pin_memory"] = False  # page-locked host memory needs a real CUDA runtime
            RECORD["pin_memory"] += 1
        if args and isinstance(args[0], torch.Tensor):
            if name in ("to", "cuda", "cpu", "type_as"):
                return self._move(func, name, args, kwargs)
            if name in ("numpy", "__array__") and on_gpu(args[0]) and not kwargs.get("force"):
                raise _numpy_error()
            if name == "get_device" and on_gpu(args[0]):
                return 0
            if name == "type" and len(args) == 1 and not kwargs and on_gpu(args[0]):
                return func(*args).replace("torch.", "torch.cuda.", 1)
        if name.startswith("_foreach_"):
            out = func(*args, **kwargs)
            first = args[0] if args and isinstance(args[0], (list, tuple)) else ()
            if isinstance(out, (list, tuple)):
                for o, a in zip(out, first):
                    if isinstance(o, torch.Tensor) and isinstance(a, torch.Tensor) and on_gpu(a):
                        _set(o, True)
            return out
        device = kwargs.get("device")
        if device is not None and not isinstance(device, torch.Tensor):
            if _is_cuda(device):
                kwargs["device"] = CPU
                RECORD[f"factory.{name}"] += 1
                inputs = tuple(_tensors(args))
                return _placed(func(*args, **kwargs), True, inputs)
            if _is_host(device):
                inputs = tuple(_tensors(args))
                return _placed(func(*args, **kwargs), False, inputs)
        inputs = tuple(_tensors(args))
        if kwargs:
            inputs += tuple(_tensors(kwargs.values()))
        gpu = None
        for t in inputs:
            if on_gpu(t):
                gpu = t
                break
        if gpu is None:
            return func(*args, **kwargs)
        if name == "__iter__":  # `for row in gpu_tensor`: the rows are on the GPU too
            rows = list(func(*args, **kwargs))
            if on_gpu(args[0]):
                _tag_new(rows, inputs)
            return iter(rows)
        if name in _FOLLOW_SELF:
            if name == "__getitem__" and not on_gpu(args[0]) and args[0].dim() != 0:
                raise SimulatedDeviceError(
                    "simulated CUDA: indices should be either on cpu or on the same device as "
                    "the indexed tensor (cpu)")
            out = func(*args, **kwargs)
            if on_gpu(args[0]):
                _tag_new(out, inputs)
            return out
        if name not in _NO_CHECK:
            self._check(name, inputs, gpu)
        out = func(*args, **kwargs)
        if name in _HOST_INTS_OK and isinstance(out, tuple):  # batch sizes/lengths stay on the host
            _tag_new(tuple(o for o in out if not (isinstance(o, torch.Tensor) and o.dtype in _INT_DTYPES)), inputs)
        else:
            _tag_new(out, inputs)
        return out

    @staticmethod
    def _check(name, inputs, gpu):
        ints_ok = name in _HOST_INTS_OK
        for t in inputs:
            if on_gpu(t) or t.dim() == 0 or t.device.type != "cpu":
                continue
            if ints_ok and t.dtype in _INT_DTYPES:
                continue
            raise _mismatch(name, gpu, t)

    @staticmethod
    def _get(func, args):
        attr = getattr(func.__self__, "__name__", "")
        t = args[0] if args else None
        if isinstance(t, torch.Tensor) and on_gpu(t):
            if attr == "device":
                return CUDA0
            if attr == "is_cuda":
                return True
            if attr == "is_cpu":
                return False
        out = func(*args)
        if isinstance(t, torch.Tensor) and isinstance(out, torch.Tensor) and out is not t:
            _set(out, on_gpu(t))  # a gradient, `.data`, `.T`: where its tensor is
        return out

    def _move(self, func, name, args, kwargs):
        """``.to``/``.cuda``/``.cpu``/``.type_as``: run on the CPU, place the result."""
        src, rest = args[0], list(args[1:])
        target = None  # None: no device asked for (a dtype change)
        if name == "cuda":
            target = True
            rest, kwargs = [], {k: v for k, v in kwargs.items() if k in ("non_blocking", "memory_format")}
        elif name == "cpu":
            target = False
        elif name == "type_as":
            target = on_gpu(rest[0]) if rest and isinstance(rest[0], torch.Tensor) else None
        else:
            if rest and isinstance(rest[0], torch.Tensor):
                target = on_gpu(rest[0])
            elif rest and (_is_cuda(rest[0]) or _is_host(rest[0])):
                target = _is_cuda(rest[0])
                rest[0] = CPU
            if kwargs.get("device") is not None:
                target = _is_cuda(kwargs["device"]) if (_is_cuda(kwargs["device"]) or _is_host(kwargs["device"])) else target
                if _is_cuda(kwargs["device"]):
                    kwargs["device"] = CPU
        if target and not self.quiet:
            RECORD[f"tensor.{name}"] += 1
        if name == "cuda":
            out = src.clone() if kwargs.pop("copy", False) else src
        else:
            out = func(src, *rest, **kwargs)
        if target is None:
            return _placed(out, on_gpu(src), (src,)) if out is not src else out
        return _placed(out, target, (src,))


# ---- runtime stubs -----------------------------------------------------------------------

class _Event:
    def __init__(self, *a, **k) -> None:
        self.t = None

    def record(self, *a, **k) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        RECORD["synchronize"] += 1

    def query(self) -> bool:
        return True

    def elapsed_time(self, end) -> float:
        return ((end.t or 0.0) - (self.t or 0.0)) * 1000.0

    def wait(self, *a, **k) -> None:
        pass


class _Stream:
    def __init__(self, *a, **k) -> None:
        pass

    def synchronize(self) -> None:
        RECORD["synchronize"] += 1

    def wait_stream(self, *a) -> None:
        pass

    def wait_event(self, *a) -> None:
        pass

    def record_event(self, event=None):
        return event or _Event()

    def query(self) -> bool:
        return True

    def __enter__(self):
        return self

    def __exit__(self, *a) -> None:
        return None


def _count(key, value=None):
    def f(*a, **k):
        RECORD[key] += 1
        return value

    return f


def _module_target(args, kwargs):
    """Where ``Module.to(*args, **kwargs)`` moves a module: True (GPU), False (host),
    None (no device: a dtype change); and the arguments with the device taken out."""
    target, rest = None, []
    for a in args:
        if isinstance(a, torch.Tensor):
            target = on_gpu(a)
            rest.append(a.dtype)
        elif _is_cuda(a) or _is_host(a):
            target = _is_cuda(a)
        else:
            rest.append(a)
    kwargs = dict(kwargs)
    dev = kwargs.pop("device", None)
    if dev is not None:
        target = _is_cuda(dev) if (_is_cuda(dev) or _is_host(dev)) else target
        if not (_is_cuda(dev) or _is_host(dev)):
            kwargs["device"] = dev
    if "tensor" in kwargs:
        t = kwargs.pop("tensor")
        target = on_gpu(t)
        kwargs["dtype"] = t.dtype
    return target, rest, kwargs


def install() -> SimulatedCuda:
    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.current_device = lambda: 0
    cuda.synchronize = _count("synchronize")
    cuda.set_device = _count("set_device")
    cuda.empty_cache = _count("empty_cache")
    cuda.reset_peak_memory_stats = _count("reset_peak_memory_stats")
    cuda.get_device_name = lambda *a, **k: "Simulated CUDA device"
    cuda.get_device_capability = lambda *a, **k: (9, 0)
    cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
        name="Simulated CUDA device", total_memory=80 * 2**30, major=9, minor=0, multi_processor_count=132)
    cuda.memory_summary = lambda *a, **k: "simulated"
    cuda.Event = _Event
    cuda.Stream = _Stream
    cuda.current_stream = lambda *a, **k: _Stream()
    cuda.stream = lambda *a, **k: contextlib.nullcontext()
    cuda.device = lambda *a, **k: contextlib.nullcontext()
    torch.Tensor.pin_memory = lambda self, *a, **k: self
    torch.Tensor.is_pinned = lambda self, *a, **k: False
    mode = SimulatedCuda()

    module_to = torch.nn.Module.to

    def to(self, *args, **kwargs):
        target, rest, kw = _module_target(args, kwargs)
        if target is None:
            return module_to(self, *args, **kwargs)
        if target:
            RECORD["module.to"] += 1
        mode.quiet += 1
        try:
            if rest or kw:
                module_to(self, *rest, **kw)
        finally:
            mode.quiet -= 1
        _move_module(self, target)
        return self

    def module_cuda(self, device=None):
        RECORD["module.cuda"] += 1
        _move_module(self, True)
        return self

    def module_cpu(self):
        _move_module(self, False)
        return self

    torch.nn.Module.to = to
    torch.nn.Module.cuda = module_cuda
    torch.nn.Module.cpu = module_cpu

    # nn.Parameter(t) / deepcopy of a GPU parameter: a GPU parameter
    param_new = torch.nn.Parameter.__new__

    def parameter_new(cls, data=None, requires_grad=True):
        p = param_new(cls, data, requires_grad)
        if data is not None and on_gpu(data):
            _set(p, True)
        return p

    torch.nn.Parameter.__new__ = staticmethod(parameter_new)

    load = torch.load

    def patched_load(*args, **kwargs):
        ml = kwargs.get("map_location", args[1] if len(args) > 1 else None)
        if ml is not None and _is_cuda(ml):
            RECORD["load.map_location"] += 1
            if len(args) > 1:
                args = (args[0], CPU, *args[2:])
            else:
                kwargs["map_location"] = CPU
            out = load(*args, **kwargs)
            _walk(out, _tag)
            return out
        out = load(*args, **kwargs)
        if ml is not None and _is_host(ml):
            _walk(out, lambda t: _set(t, False))
        return out  # no map_location: tensors saved from the GPU come back there

    torch.load = patched_load

    jit_load = torch.jit.load

    def patched_jit_load(f, map_location=None, *args, **kwargs):
        if map_location is not None and _is_cuda(map_location):
            RECORD["load.map_location"] += 1
            module = jit_load(f, CPU, *args, **kwargs)
            _place_module(module, True)
            return module
        return jit_load(f, map_location, *args, **kwargs)

    torch.jit.load = patched_jit_load

    # TorchScript runs outside the mode: its results live where its inputs/weights are
    script_call = torch.jit.ScriptModule.__call__

    def script_module_call(self, *args, **kwargs):
        ins = tuple(_tensors(args)) + tuple(_tensors(kwargs.values()))
        params = list(self.parameters())
        if params and ins:
            # its weights all on one side and a (non-scalar) input on the other: a GPU raises
            # inside the TorchScript interpreter (seen on an H100: a module loaded with
            # map_location=device fed a host batch)
            gpu_w = [p for p in params if on_gpu(p)]
            host_w = [p for p in params if not on_gpu(p)]
            for t in ins:
                if t.dim() == 0:
                    continue
                if gpu_w and not host_w and not on_gpu(t):
                    raise _mismatch("a TorchScript module's call", gpu_w[0], t)
                if host_w and not gpu_w and on_gpu(t):
                    raise _mismatch("a TorchScript module's call", t, host_w[0])
        out = script_call(self, *args, **kwargs)
        if any(on_gpu(t) for t in ins) or any(on_gpu(p) for p in params):
            _tag_new(out, ins)
        return out

    torch.jit.ScriptModule.__call__ = script_module_call

    script_fn_call = torch.jit.ScriptFunction.__call__

    def script_function_call(self, *args, **kwargs):
        out = script_fn_call(self, *args, **kwargs)
        ins = tuple(_tensors(args)) + tuple(_tensors(kwargs.values()))
        if any(on_gpu(t) for t in ins):
            _tag_new(out, ins)
        return out

    torch.jit.ScriptFunction.__call__ = script_function_call

    mode.__enter__()
    return mode


def asked_for_cuda(value) -> bool:
    """Whether ``value`` would live on the GPU: a tensor, a Module (all its parameters and
    buffers; a module without any: moved itself), or a non-empty list/dict of them."""
    if isinstance(value, (list, tuple)):
        return bool(value) and all(asked_for_cuda(v) for v in value)
    if isinstance(value, dict):
        return bool(value) and all(asked_for_cuda(v) for v in value.values())
    if isinstance(value, torch.nn.Module):
        held = [*value.parameters(), *value.buffers()]
        return all(on_gpu(t) for t in held) if held else on_gpu(value)
    return on_gpu(value)


def main() -> None:
    from fixture_runner import parse_args, run_as_main

    ns = parse_args("--record")
    g = run_as_main(ns.program, before=install)
    if ns.record:
        names = ns.names
        with open(ns.record, "w") as fh:
            json.dump({"placements": dict(RECORD), "asked": {n: asked_for_cuda(g.get(n)) for n in names}}, fh)


if __name__ == "__main__":
    main()
