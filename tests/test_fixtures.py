"""The fixture harness: every tests/fixtures/<CODE>/<case>/ is a real program.

For each case: the rule reports exactly the expected lines in before.py; fixing
before.py yields after.py byte for byte (traps: no finding, no change); a second fix
changes nothing; after.py has no finding of the rule; both programs run on CPU-only
torch with the same output (or before.py crashes as documented); and, where CUDA is
present, after.py runs with CUDA visible and its reported values live on cuda.
"""

from __future__ import annotations

import re

import pytest

from devlint import registry
from devlint.engine import Settings, fix_source, lint_source
from devlint.settings import with_project
from fixtures_lib import discover_cases, run_program

CASES = discover_cases()
IDS = [c.id for c in CASES]


def _settings(case, path=None, source=None) -> Settings:
    """The case's settings, with the project facts of ``path`` as the CLI computes them (a
    fixture folder is a small project: its helper modules are read by the project index)."""
    s = Settings(select=registry.resolve(case.select), unsafe_fixes=case.unsafe)
    return with_project(s, str(path), source) if path is not None else s


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_every_rule_has_fixtures():
    per_code = {}
    for c in CASES:
        per_code.setdefault(c.code, []).append(c)
    for rule in registry.all_rules():
        cases = per_code.get(rule.code, [])
        minimum = 6 if rule.code in ("DL001", "DL002", "DL003", "DL004") else 5
        assert len(cases) >= minimum, f"{rule.code} has {len(cases)} fixture programs, needs {minimum}"
        assert any(c.trap for c in cases), f"{rule.code} has no trap fixture"
        assert any(not c.trap for c in cases), f"{rule.code} has no bug fixture"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reports_expected_lines(case):
    src = case.before_path.read_bytes()
    diags = lint_source(src, str(case.before_path), _settings(case, case.before_path, src)).diagnostics
    lines = sorted(d.line for d in diags if d.code == case.code)
    assert lines == sorted(case.lines), [f"{d.line}: {d.code} {d.message}" for d in diags]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fix_matches_after_and_is_idempotent(case):
    before = case.before_path.read_bytes()
    settings = _settings(case, case.before_path, before)
    expected = case.after_path.read_bytes()
    out = fix_source(before, str(case.before_path), settings)
    assert out.converged
    assert out.source.decode() == expected.decode()
    again = fix_source(out.source, str(case.after_path), settings)
    assert again.source == out.source, "a second --fix changed the file"
    left = [d for d in lint_source(expected, str(case.after_path), settings).diagnostics if d.code == case.code]
    fixable_left = [d for d in left if d.fix is not None]
    assert not fixable_left, [f"{d.line}: {d.message}" for d in fixable_left]
    if not case.trap and not case.extra.get("report_only"):
        assert not left, [f"{d.line}: {d.message}" for d in left]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_programs_run_on_cpu(case):
    after, _ = run_program(case.after_path)
    assert after.returncode == 0, after.stderr[-2000:]
    assert after.stdout.strip(), "fixture programs must print a result"
    if case.trap:
        return
    before, _ = run_program(case.before_path)
    if case.before == "crash":
        assert before.returncode != 0, "before.py was expected to fail on a CPU-only machine"
        assert re.search(case.crash, before.stderr), before.stderr[-2000:]
    else:
        assert before.returncode == 0, before.stderr[-2000:]
        assert before.stdout == after.stdout


@pytest.mark.cuda
@pytest.mark.parametrize("case", [c for c in CASES if c.cuda_names], ids=[c.id for c in CASES if c.cuda_names])
def test_after_places_values_on_cuda(case):
    if not _cuda_available():
        pytest.skip("CUDA is not available on this machine (the CPU half of the harness still ran)")
    proc, devices = run_program(case.after_path, cuda=True, names=case.cuda_names)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in case.cuda_names:
        dev = devices.get(name)
        flat = str(dev)
        assert "cuda" in flat and "cpu" not in flat, f"{name} is on {dev}"


# ---- the CUDA half (runs where a GPU is present: scripts/verify_cuda.sh) ----------------------

RTOL, ATOL = 1e-3, 1e-4  # CUDA kernels (TF32, reduction order) differ from CPU in the last digits
_NUM = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+")


# a printed tensor names its device when it is not the CPU: `tensor([1., 2.], device='cuda:0')`
_DEVICE_TAG = re.compile(r",\s*device='cuda(?::\d+)?'")


def outputs_match(cpu: str, gpu: str) -> bool:
    """Same text once numbers are compared with RTOL/ATOL and a printed tensor's device tag
    is dropped (the values are compared, not where they live)."""
    gpu = _DEVICE_TAG.sub("", gpu)
    if _NUM.sub("#", cpu) != _NUM.sub("#", gpu):
        return False
    for a, b in zip(_NUM.findall(cpu), _NUM.findall(gpu)):
        x, y = float(a), float(b)
        if abs(x - y) > ATOL + RTOL * abs(x):
            return False
    return True


def test_outputs_match_tolerance():
    assert outputs_match("loss 0.12345\n", "loss 0.12349\n")
    assert not outputs_match("loss 0.1234\n", "loss 0.2234\n")
    assert not outputs_match("loss 0.1\n", "acc 0.1\n")
    # seen on an H100: `print(w.grad)` of a CUDA tensor names its device
    assert outputs_match("True tensor([1., 2., 3.])\n", "True tensor([1., 2., 3.], device='cuda:0')\n")
    assert outputs_match("tensor([[1.]])\n", "tensor([[1.]],\n       device='cuda:0')\n")
    assert not outputs_match("tensor([1.])\n", "tensor([2.], device='cuda:0')\n")


@pytest.mark.cuda
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_after_on_cuda_prints_the_cpu_result(case):
    if not _cuda_available():
        pytest.skip("CUDA is not available on this machine (the CPU half of the harness still ran)")
    if case.extra.get("cuda_output") == "differs":
        pytest.skip(f"{case.id}: output differs on CUDA by design: {case.extra.get('cuda_reason', '')}")
    cpu, _ = run_program(case.after_path)
    # seeded random draws on the device come from the CPU generator (fixture_runner.cpu_rng_mode)
    gpu, _ = run_program(case.after_path, cuda=True, extra_env={"DEVLINT_CPU_RNG": "1"})
    assert gpu.returncode == 0, gpu.stderr[-2000:]
    assert outputs_match(cpu.stdout, gpu.stdout), (cpu.stdout, gpu.stdout)


CUDA_BUGS = [c for c in CASES if c.extra.get("cuda_before")]


@pytest.mark.cuda
@pytest.mark.parametrize("case", CUDA_BUGS, ids=[c.id for c in CUDA_BUGS])
def test_before_misbehaves_on_cuda_as_documented(case):
    """e.g. DL001: the tensor is left on the CPU and the next op raises a device mismatch."""
    if not _cuda_available():
        pytest.skip("CUDA is not available on this machine")
    proc, _ = run_program(case.before_path, cuda=True)
    if case.extra["cuda_before"] == "crash":
        assert proc.returncode != 0
        assert re.search(case.extra.get("cuda_crash", ""), proc.stderr), proc.stderr[-2000:]
    else:  # "differs": runs, but prints something other than the fixed program
        fixed, _ = run_program(case.after_path, cuda=True)
        assert proc.returncode == 0 and proc.stdout != fixed.stdout
