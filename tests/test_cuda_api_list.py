"""Keeps DL004's list of CUDA calls honest: each listed call is run on the installed torch.

Every name in ``RAISES_ON_CPU`` must raise on a CPU-only build, every name in
``SAFE_ON_CPU`` must not. The list lives in the rule (rules/dl004_unguarded_cuda_api.py);
nothing is read from outside the repository. On a CUDA build of torch the measurement
does not apply (hiding the GPUs is not the same as a CPU-only build): the test skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from devlint.rules.dl004_unguarded_cuda_api import RAISES_ON_CPU, SAFE_ON_CPU, cuda_api_name

# One snippet per listed name: the call as a user writes it.
SNIPPETS = {
    "synchronize": "torch.cuda.synchronize()",
    "set_device": "torch.cuda.set_device(0)",
    "current_device": "torch.cuda.current_device()",
    "get_device_name": "torch.cuda.get_device_name(0)",
    "get_device_properties": "torch.cuda.get_device_properties(0)",
    "get_device_capability": "torch.cuda.get_device_capability()",
    "reset_peak_memory_stats": "torch.cuda.reset_peak_memory_stats()",
    "reset_max_memory_allocated": "torch.cuda.reset_max_memory_allocated()",
    "reset_accumulated_memory_stats": "torch.cuda.reset_accumulated_memory_stats()",
    "memory_summary": "torch.cuda.memory_summary()",
    "memory_snapshot": "torch.cuda.memory_snapshot()",
    "mem_get_info": "torch.cuda.mem_get_info()",
    "Stream": "torch.cuda.Stream()",
    "Event": "torch.cuda.Event(enable_timing=True)",
    "ExternalStream": "torch.cuda.ExternalStream(0)",
    "CUDAGraph": "torch.cuda.CUDAGraph()",
    "graph": "with torch.cuda.graph(torch.cuda.CUDAGraph()):\n    pass",
    "device": "with torch.cuda.device(0):\n    pass",
    "current_stream": "torch.cuda.current_stream()",
    "default_stream": "torch.cuda.default_stream()",
    "set_per_process_memory_fraction": "torch.cuda.set_per_process_memory_fraction(0.5)",
    "ipc_collect": "torch.cuda.ipc_collect()",
    "init": "torch.cuda.init()",
    "get_rng_state": "torch.cuda.get_rng_state()",
    "can_device_access_peer": "torch.cuda.can_device_access_peer(0, 1)",
    "current_blas_handle": "torch.cuda.current_blas_handle()",
    "get_sync_debug_mode": "torch.cuda.get_sync_debug_mode()",
    "set_sync_debug_mode": "torch.cuda.set_sync_debug_mode(0)",
    "cudart": "torch.cuda.cudart()",
    "caching_allocator_alloc": "torch.cuda.caching_allocator_alloc(16)",
    "nvtx.range_push": "torch.cuda.nvtx.range_push('a')",
    "nvtx.range_pop": "torch.cuda.nvtx.range_pop()",
    "nvtx.mark": "torch.cuda.nvtx.mark('a')",
    "nvtx.range": "with torch.cuda.nvtx.range('a'):\n    pass",
    # safe
    "is_available": "torch.cuda.is_available()",
    "is_initialized": "torch.cuda.is_initialized()",
    "device_count": "assert torch.cuda.device_count() == 0",
    "manual_seed": "torch.cuda.manual_seed(0)",
    "manual_seed_all": "torch.cuda.manual_seed_all(0)",
    "seed": "torch.cuda.seed()",
    "seed_all": "torch.cuda.seed_all()",
    "empty_cache": "torch.cuda.empty_cache()",
    "memory_allocated": "torch.cuda.memory_allocated()",
    "max_memory_allocated": "torch.cuda.max_memory_allocated()",
    "memory_reserved": "torch.cuda.memory_reserved()",
    "max_memory_reserved": "torch.cuda.max_memory_reserved()",
    "memory_stats": "torch.cuda.memory_stats()",
    "is_bf16_supported": "torch.cuda.is_bf16_supported()",
    "get_arch_list": "torch.cuda.get_arch_list()",
    "get_gencode_flags": "torch.cuda.get_gencode_flags()",
    "set_rng_state": "torch.cuda.set_rng_state(torch.zeros(8, dtype=torch.uint8))",
    "get_rng_state_all": "torch.cuda.get_rng_state_all()",
    "list_gpu_processes": "torch.cuda.list_gpu_processes()",
    "stream": "with torch.cuda.stream(None):\n    pass",
    "set_stream": "torch.cuda.set_stream(None)",
    "device_of": "with torch.cuda.device_of(torch.ones(1)):\n    pass",
    "amp.GradScaler": "torch.cuda.amp.GradScaler()",
    "amp.autocast": "with torch.cuda.amp.autocast():\n    pass",
}
# Not torch.cuda.* but part of what DL004 reports (or must never report).
EXTRA_RAISES = {"Tensor.pin_memory": "torch.ones(2).pin_memory()"}
EXTRA_SAFE = {
    "cudnn.benchmark": "torch.backends.cudnn.benchmark = True",
    "torch.device": "torch.device('cuda')",
    "torch.autocast": "with torch.autocast('cuda'):\n    pass",
    "amp.GradScaler('cuda')": "torch.amp.GradScaler('cuda')",
    "DataParallel": "torch.nn.DataParallel(torch.nn.Linear(1, 1))",
}

RUNNER = textwrap.dedent('''
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import torch
    out = {}
    for name, code in json.loads(sys.stdin.read()).items():
        try:
            exec(code, {"torch": torch})
            out[name] = None
        except BaseException as exc:  # noqa: BLE001 - any failure counts as "raises"
            out[name] = type(exc).__name__ + ": " + str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def measured():
    torch = pytest.importorskip("torch")
    if torch.version.cuda is not None or torch.cuda.is_available():
        pytest.skip(f"torch {torch.__version__} is a CUDA build: the list is measured on a CPU-only build")
    snippets = {**SNIPPETS, **EXTRA_RAISES, **EXTRA_SAFE}
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(snippets), capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_listed_call_has_a_snippet():
    listed = RAISES_ON_CPU | SAFE_ON_CPU
    assert not RAISES_ON_CPU & SAFE_ON_CPU
    assert listed == set(SNIPPETS), (listed ^ set(SNIPPETS))


@pytest.mark.parametrize("name", sorted(RAISES_ON_CPU | set(EXTRA_RAISES)))
def test_listed_call_raises_on_cpu_only_torch(measured, name):
    assert measured[name] is not None, f"{name} no longer raises on a CPU-only build: drop it from RAISES_ON_CPU"


@pytest.mark.parametrize("name", sorted(SAFE_ON_CPU | set(EXTRA_SAFE)))
def test_safe_call_does_not_raise_on_cpu_only_torch(measured, name):
    assert measured[name] is None, f"{name} raises on a CPU-only build ({measured[name]}): list it in RAISES_ON_CPU"


def test_api_names_are_folded_from_submodules():
    assert cuda_api_name("torch.cuda.memory.memory_summary") == "memory_summary"
    assert cuda_api_name("torch.cuda.synchronize") == "synchronize"
    assert cuda_api_name("torch.cuda.nvtx.range_push") == "nvtx.range_push"
    assert cuda_api_name("torch.backends.cudnn.benchmark") is None
