"""Simulated CUDA: run a program on a CPU-only machine as if a GPU were present.

    python tests/simulated_cuda.py PROGRAM [--record OUT.json] [--names a,b]

A CPU-CI *proxy* for the real GPU run (scripts/verify_cuda.sh), never a substitute:
``torch.cuda.is_available()`` answers True, runtime calls that raise on a CPU build
(``synchronize``, ``Event``, ``Stream``, ``set_device`` ...) are stubbed, and a
``TorchFunctionMode`` plus wrappers of ``nn.Module.to``/``nn.Module.cuda`` redirect every
CUDA placement to the CPU and record it. So CI can check that a fixed program *asks*
for the GPU for its model, batches and new tensors, and that its guarded CUDA-only
branches run. Values that were asked onto CUDA carry ``_devlint_cuda = True``.
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


def _is_cuda(v) -> bool:
    if isinstance(v, str):
        return v.startswith("cuda")
    if isinstance(v, torch.device):
        return v.type == "cuda"
    return isinstance(v, int) and not isinstance(v, bool)  # `.to(0)`: a CUDA index


def _tag(value):
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        try:
            object.__setattr__(value, "_devlint_cuda", True)
        except Exception:  # noqa: BLE001 - some tensor subclasses refuse attributes
            pass
    return value


def _asked(values) -> bool:
    for v in values:
        if isinstance(v, torch.Tensor) and getattr(v, "_devlint_cuda", False):
            return True
        if isinstance(v, (list, tuple)) and _asked(v):
            return True
    return False


def _tag_all(out):
    if isinstance(out, (list, tuple)):
        for o in out:
            _tag_all(o)
    else:
        _tag(out)
    return out


class RedirectCuda(TorchFunctionMode):
    def __torch_function__(self, func, types_, args=(), kwargs=None):
        out = self._dispatch(func, args, dict(kwargs or {}))
        # what is computed from GPU values lives on the GPU too (`out = model(x)`),
        # and `p.data = moved` moves the Parameter p
        if _asked(args) or _asked((kwargs or {}).values()):
            _tag_all(out)
            if getattr(func, "__name__", "") == "__set__" and args:
                _tag(args[0])
        return out

    def _dispatch(self, func, args, kwargs):
        name = getattr(func, "__name__", "")
        if kwargs.get("pin_memory"):
            kwargs["pin_memory"] = False  # page-locked host memory needs a real CUDA runtime
            RECORD["pin_memory"] += 1
        if name == "cuda" and args and isinstance(args[0], torch.Tensor):
            RECORD["tensor.cuda"] += 1
            return _tag(args[0].clone() if kwargs.get("copy") else args[0])
        asked = False
        if name == "to" and args and isinstance(args[0], torch.Tensor):
            rest = list(args[1:])
            if rest and _is_cuda(rest[0]):
                rest[0], asked = CPU, True
            if "device" in kwargs and _is_cuda(kwargs["device"]):
                kwargs["device"], asked = CPU, True
            if asked:
                RECORD["tensor.to"] += 1
            out = func(args[0], *rest, **kwargs)
            return _tag(out) if asked else out
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs["device"] = CPU
            RECORD[f"factory.{name}"] += 1
            return _tag(func(*args, **kwargs))
        return func(*args, **kwargs)


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


def install() -> RedirectCuda:
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

    module_to = torch.nn.Module.to

    def to(self, *args, **kwargs):
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is not None and device.type == "cuda":
            RECORD["module.to"] += 1
            args = tuple(CPU if _is_cuda(a) else a for a in args)
            if "device" in kwargs:
                kwargs["device"] = CPU
            out = module_to(self, *args, **kwargs)
            _tag_module(self)
            return out
        return module_to(self, *args, **kwargs)

    def _tag_module(m):
        _tag(m)
        for t in (*m.parameters(), *m.buffers()):
            _tag(t)

    def module_cuda(self, device=None):
        RECORD["module.cuda"] += 1
        _tag_module(self)
        return self

    torch.nn.Module.to = to
    torch.nn.Module.cuda = module_cuda

    load = torch.load

    def patched_load(*args, **kwargs):
        ml = kwargs.get("map_location", args[1] if len(args) > 1 else None)
        if ml is not None and _is_cuda(ml):
            RECORD["load.map_location"] += 1
            if len(args) > 1:
                args = (args[0], CPU, *args[2:])
            else:
                kwargs["map_location"] = CPU
        return load(*args, **kwargs)

    torch.load = patched_load

    jit_load = torch.jit.load

    def patched_jit_load(f, map_location=None, *args, **kwargs):
        if map_location is not None and _is_cuda(map_location):
            RECORD["load.map_location"] += 1
            module = jit_load(f, CPU, *args, **kwargs)
            _tag_module(module)
            return module
        return jit_load(f, map_location, *args, **kwargs)

    torch.jit.load = patched_jit_load
    mode = RedirectCuda()
    mode.__enter__()
    return mode


def asked_for_cuda(value) -> bool:
    if isinstance(value, (list, tuple)):
        return bool(value) and all(asked_for_cuda(v) for v in value)
    if isinstance(value, dict):
        return bool(value) and all(asked_for_cuda(v) for v in value.values())
    return bool(getattr(value, "_devlint_cuda", False))


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
