"""Counts the host<->device conversions a program executes, the way a user runs it.

    python tests/transfer_counter.py PROGRAM [--out COUNTS.json] [--cuda-profile]

The program runs as ``__main__`` (its stdout/stderr pass through untouched). Counts:

* on any machine, with a ``TorchFunctionMode``: every executed ``.cpu()``, ``.numpy()``,
  ``.item()``, ``.tolist()``, ``.cuda()``, ``.to(<device or tensor>)`` (a dtype-only
  ``.to`` is not a transfer) and ``torch.tensor/as_tensor(..., device=...)``. On a CPU-only
  machine these are the transfers the program *would* do on a GPU;
* where CUDA is available (or ``--cuda-profile``), with ``torch.profiler``: the executed
  ``Memcpy HtoD`` / ``Memcpy DtoH`` kernels and ``cudaDeviceSynchronize`` /
  ``cudaStreamSynchronize`` calls.

``COUNTS.json``::

    {"conversions": 12,                       # to_host + to_device
     "to_host": 9, "to_device": 3,
     "by_method": {"cpu": 3, "numpy": 3, "to": 3, "item": 3},
     "cuda": false,                           # true when the profiler counts below ran
     "memcpy_htod": 0, "memcpy_dtoh": 0, "syncs": 0}

From Python (what the tests use): ``count_program(path) -> (CompletedProcess, counts)``
runs the counter in a subprocess, CUDA hidden unless ``cuda=True``.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

TO_HOST = ("cpu", "numpy", "item", "tolist")
TO_DEVICE = ("cuda", "to", "tensor", "as_tensor")


def _is_device_like(v) -> bool:
    import torch

    return isinstance(v, (str, int, torch.device, torch.Tensor)) and not isinstance(v, bool)


def make_mode(counts: Counter):
    """A TorchFunctionMode that adds one to ``counts[method]`` per executed conversion."""
    from torch.overrides import TorchFunctionMode

    class _Count(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in TO_HOST or name == "cuda":
                counts[name] += 1
            elif name == "to":
                rest = args[1:]
                if (rest and _is_device_like(rest[0])) or kwargs.get("device") is not None:
                    counts[name] += 1
            elif name in ("tensor", "as_tensor") and kwargs.get("device") is not None:
                counts[name] += 1
            return func(*args, **kwargs)

    return _Count()


def _profile_counts(prof) -> dict:
    htod = dtoh = syncs = 0
    for ev in prof.events():
        n = ev.name
        if "Memcpy HtoD" in n:
            htod += 1
        elif "Memcpy DtoH" in n:
            dtoh += 1
        elif n in ("cudaDeviceSynchronize", "cudaStreamSynchronize"):
            syncs += 1
    return {"memcpy_htod": htod, "memcpy_dtoh": dtoh, "syncs": syncs}


def run_counted(program: str, cuda_profile: bool | None = None) -> dict:
    """Run ``program`` as ``__main__`` in this process and return its counts."""
    import torch

    prog = os.path.abspath(program)
    sys.argv = [prog]
    sys.path.insert(0, os.path.dirname(prog))
    counts: Counter = Counter()
    use_cuda = torch.cuda.is_available() if cuda_profile is None else cuda_profile
    prof = None
    if use_cuda:
        from torch.profiler import ProfilerActivity, profile

        # on a CPU-only machine the profiler path still runs (CPU events only): no copies to count
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        prof = profile(activities=acts)
        prof.__enter__()
    try:
        with make_mode(counts):
            runpy.run_path(prog, run_name="__main__")
    finally:
        if prof is not None:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            prof.__exit__(None, None, None)
    to_host = sum(counts[m] for m in TO_HOST)
    to_device = sum(counts[m] for m in TO_DEVICE)
    out = {"conversions": to_host + to_device, "to_host": to_host, "to_device": to_device,
           "by_method": dict(sorted(counts.items())), "cuda": prof is not None,
           "memcpy_htod": 0, "memcpy_dtoh": 0, "syncs": 0}
    if prof is not None:
        out.update(_profile_counts(prof))
    return out


def count_program(path, *, cuda: bool = False, timeout: int = 120, extra_env=None):
    """Run ``path`` under the counter in a subprocess (CUDA hidden unless ``cuda``).

    Returns ``(CompletedProcess, counts dict or None)``; counts is None when the program failed.
    """
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"
    env.setdefault("OMP_NUM_THREADS", "1")
    if not cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra_env or {})
    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "counts.json"
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(path), "--out", str(out)],
                              capture_output=True, text=True, timeout=timeout, env=env, cwd=path.parent)
        counts = json.loads(out.read_text()) if out.exists() else None
    return proc, counts


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("program")
    ap.add_argument("--out", help="write the counts here as JSON (default: stderr)")
    ap.add_argument("--cuda-profile", action="store_true", default=None,
                    help="also count memcpy/sync events with torch.profiler (default: when CUDA is available)")
    ns = ap.parse_args(argv)
    counts = run_counted(ns.program, ns.cuda_profile)
    text = json.dumps(counts, indent=1)
    if ns.out:
        Path(ns.out).write_text(text)
    else:
        print(text, file=sys.stderr)


if __name__ == "__main__":
    main()
