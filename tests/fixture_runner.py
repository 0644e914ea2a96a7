"""Runs a fixture program for real, the way a user would, and reports where its values live.

    python tests/fixture_runner.py PROGRAM [--devices OUT.json] [--names a,b]

The program runs as ``__main__``. Afterwards the named globals (tensors, modules,
lists/dicts of tensors) are written to OUT.json as ``{name: device}``; for a Module,
the devices of its parameters and buffers.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys


def _device_of(value):
    import torch

    if isinstance(value, torch.Tensor):
        return str(value.device)
    if isinstance(value, torch.nn.Module):
        devs = {str(t.device) for t in (*value.parameters(), *value.buffers())}
        return sorted(devs)[0] if len(devs) == 1 else sorted(devs)
    if isinstance(value, (list, tuple)):
        return [_device_of(v) for v in value]
    if isinstance(value, dict):
        return {k: _device_of(v) for k, v in value.items()}
    return None


def parse_args(out_option: str) -> argparse.Namespace:
    """PROGRAM, ``out_option`` (where to write the report) and ``--names a,b``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument(out_option)
    ap.add_argument("--names", default="")
    ns = ap.parse_args()
    ns.names = [n for n in ns.names.split(",") if n]
    return ns


def run_as_main(program: str, before=None) -> dict:
    """Run ``program`` as ``python program`` would (argv, sys.path, ``__main__``), after
    calling ``before()``; its globals."""
    prog = os.path.abspath(program)
    sys.argv = [prog]
    sys.path.insert(0, os.path.dirname(prog))
    if before is not None:
        before()
    return runpy.run_path(prog, run_name="__main__")


_RANDOM_FACTORIES = ("randn", "rand", "randint", "randperm", "normal")
_RANDOM_LIKE = ("randn_like", "rand_like", "randint_like")


def cpu_rng_mode(device_types=("cuda",)):
    """A TorchFunctionMode under which seeded random factories asked for a device of
    ``device_types`` draw from the CPU generator and move the result: a CUDA run then sees
    the numbers a CPU run sees (the CUDA generator gives others for the same seed). Other
    devices are left alone: a draw on ``meta`` consumes no generator on either run."""
    import torch
    from torch.overrides import TorchFunctionMode

    factories = {getattr(torch, n) for n in _RANDOM_FACTORIES}
    likes = {getattr(torch, n) for n in _RANDOM_LIKE}

    def moved(drawn, dev, requires_grad):
        # drawn without autograd and moved, then marked: the result is a leaf, as a
        # factory's result is (an optimizer refuses a non-leaf parameter)
        return drawn.to(dev).requires_grad_(requires_grad)

    class CpuRng(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in factories and kwargs.get("device") is not None:
                dev = torch.device(kwargs["device"])
                if dev.type in device_types:
                    kwargs["device"] = "cpu"
                    rg = bool(kwargs.pop("requires_grad", False))
                    return moved(func(*args, **kwargs), dev, rg)
            if func in likes and args and isinstance(args[0], torch.Tensor):
                dev = torch.device(kwargs.get("device") or args[0].device)
                if dev.type in device_types:
                    kwargs["device"] = "cpu"
                    rg = bool(kwargs.pop("requires_grad", False))
                    drawn = func(torch.empty_like(args[0], device="cpu"), *args[1:], **kwargs)
                    return moved(drawn, dev, rg)
            return func(*args, **kwargs)

    return CpuRng()


def main() -> None:
    ns = parse_args("--devices")
    if os.environ.get("DEVLINT_CPU_RNG"):
        cpu_rng_mode().__enter__()
    g = run_as_main(ns.program)
    if ns.devices:
        names = ns.names
        with open(ns.devices, "w") as fh:
            json.dump({n: _device_of(g.get(n)) for n in names}, fh)


if __name__ == "__main__":
    main()
