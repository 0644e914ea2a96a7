"""CPU-CI proxy for the GPU run: every fixed fixture program runs under simulated CUDA.

It checks that after.py puts the values its case.toml names (model, batches, new
tensors) on the GPU, that it would run there (no GPU tensor meets a host tensor in one
op, no `.numpy()` of a GPU tensor) and that its CUDA-only branches (now guarded) run,
printing what the plain CPU run prints; and that a before.py documented to crash on a
GPU (`cuda_before = "crash"`) crashes under the proxy as documented. The real check is
the GPU run (scripts/verify_cuda.sh); this one cannot see kernels or copies.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures_lib import discover_cases, run_program

HERE = Path(__file__).parent
SIM = HERE / "simulated_cuda.py"
CASES = discover_cases()


def run_simulated(program: Path, names=()):
    record = program.parent / f".sim-{os.getpid()}.json"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(SIM), str(program), "--record", str(record),
                           "--names", ",".join(names)], capture_output=True, text=True, env=env,
                          cwd=program.parent, timeout=120)
    data = json.loads(record.read_text()) if record.exists() else None
    if record.exists():
        record.unlink()
    return proc, data


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fixed_program_asks_for_the_gpu_under_simulated_cuda(case):
    proc, data = run_simulated(case.after_path, case.cuda_names)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if not case.extra.get("simulated_output_differs"):
        cpu, _ = run_program(case.after_path)
        assert proc.stdout == cpu.stdout
    for name in case.cuda_names:
        assert data["asked"][name], f"{name} was never asked onto the GPU: {data}"


CUDA_CRASHES = [c for c in CASES if c.extra.get("cuda_before") == "crash" and c.before == "same"]


@pytest.mark.parametrize("case", CUDA_CRASHES, ids=[c.id for c in CUDA_CRASHES])
def test_before_documented_to_crash_on_a_gpu_crashes_under_simulated_cuda(case):
    proc, _ = run_simulated(case.before_path)
    assert proc.returncode != 0, "before.py ran under simulated CUDA: " + proc.stdout[-500:]
    assert "simulated CUDA" in proc.stderr, proc.stderr[-2000:]
    assert re.search(case.extra.get("cuda_crash", ""), proc.stderr), proc.stderr[-2000:]


def test_simulator_records_placements_and_stubs_runtime_calls(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch\nfrom torch import nn\n"
        "model = nn.Linear(2, 2).cuda()\n"
        "x = torch.ones(3, 2).to('cuda')\n"
        "z = torch.zeros(2, device='cuda:0')\n"
        "plain = torch.ones(2)\n"
        "e = torch.cuda.Event(enable_timing=True); e.record(); torch.cuda.synchronize()\n"
        "print(model(x).shape, torch.cuda.is_available())\n"
    )
    proc, data = run_simulated(prog, ["model", "x", "z", "plain"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "torch.Size([3, 2]) True"
    assert data["asked"] == {"model": True, "x": True, "z": True, "plain": False}
    assert data["placements"]["module.cuda"] == 1
    assert data["placements"]["tensor.to"] == 1
    assert data["placements"]["factory.zeros"] == 1
    assert data["placements"]["synchronize"] == 1


def test_unfixed_gpu_only_program_still_crashes_without_simulation(tmp_path):
    prog = tmp_path / "gpu_only.py"
    prog.write_text("import torch\nx = torch.ones(2).cuda()\nprint(x)\n")
    proc, _ = run_program(prog)
    assert proc.returncode != 0
    assert "CUDA" in proc.stderr
