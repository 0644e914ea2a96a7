"""The shipped example: a GPU-only legacy training script, linted and fixed by the real CLI."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "legacy_gpu_train.py"

# Runs a program with CUDA mapped onto the CPU (`.cuda()` is a no-op, "cuda" devices become
# "cpu", legacy torch.cuda.*Tensor constructors build CPU tensors): what the original script
# computes, on a machine where it could run.
CPU_SHIM = textwrap.dedent(
    """
    import runpy, sys
    import torch

    def _cpu(d):
        return "cpu" if isinstance(d, str) and d.startswith("cuda") else d

    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    _randn = torch.randn
    torch.randn = lambda *a, device=None, **k: _randn(*a, device=_cpu(device), **k)
    torch.cuda.FloatTensor = lambda data: torch.tensor(data, dtype=torch.float32)
    runpy.run_path(sys.argv[1], run_name="__main__")
    """
)


def _env() -> dict:
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU-only machine, even where a GPU exists
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _devlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "devlint", *args], capture_output=True, text=True,
                          cwd=cwd, env=_env(), timeout=300)


def _python(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env=_env(), timeout=300)


@pytest.fixture()
def script(tmp_path: Path) -> Path:
    p = tmp_path / "legacy_gpu_train.py"
    shutil.copy(EXAMPLE, p)
    return p


def test_original_crashes_on_a_cpu_only_machine(script):
    proc = _python(script.name, cwd=script.parent)
    assert proc.returncode != 0
    assert re.search(r"Torch not compiled with CUDA enabled|Found no NVIDIA driver", proc.stderr), proc.stderr


def test_check_reports_dl001_and_dl002(script):
    proc = _devlint("check", script.name, cwd=script.parent)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = re.findall(r"legacy_gpu_train\.py:(\d+):\d+: \[\*\] (DL00\d)", proc.stdout)
    codes = {c for _, c in found}
    assert {"DL001", "DL002"} <= codes, proc.stdout
    # the discarded `x.cuda()` in the training loop is both an unassigned transfer and hard-coded
    lines = EXAMPLE.read_text().splitlines()
    dl001 = [int(n) for n, c in found if c == "DL001"]
    assert [lines[n - 1].strip() for n in dl001] == ["x.cuda()  # the result is discarded: x stays on the CPU"]


def test_diff_writes_nothing(script):
    before = script.read_bytes()
    proc = _devlint("check", "--diff", script.name, cwd=script.parent)
    assert script.read_bytes() == before
    assert "+device = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")" in proc.stdout
    assert "-        x.cuda()" in proc.stdout


def test_fix_makes_it_run_on_cpu_with_the_cpu_equivalent_result(script, tmp_path):
    proc = _devlint("check", "--fix", script.name, cwd=script.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fixed = script.read_text()
    compile(fixed, str(script), "exec")
    # every `.cuda()` that needs CUDA is gone; `criterion.cuda()` on a loss without a weight
    # tensor moves nothing, runs on a CPU (the run below proves it) and is not reported
    assert [ln.strip() for ln in fixed.splitlines() if ".cuda(" in ln] == ["criterion.cuda()"]
    assert "torch.cuda.FloatTensor" not in fixed
    assert "x = x.to(device)" in fixed

    again = _devlint("check", "--fix", script.name, cwd=script.parent)
    assert again.returncode == 0 and script.read_text() == fixed, "a second --fix changed the file"

    run = _python(script.name, cwd=script.parent)
    assert run.returncode == 0, run.stderr[-2000:]
    assert re.search(r"epoch 1 loss \d+\.\d{4}\npredictions \[\d, \d\]\n\Z", run.stdout), run.stdout

    shim = tmp_path / "cpu_shim.py"
    shim.write_text(CPU_SHIM)
    reference = _python(str(shim), str(EXAMPLE), cwd=tmp_path)
    assert reference.returncode == 0, reference.stderr[-2000:]
    assert run.stdout == reference.stdout
