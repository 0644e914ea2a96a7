"""The GPU verification entry point, exercised on CPU: what can run without a GPU does.

The GPU run itself (scripts/verify_cuda.sh on a CUDA machine) is recorded in
docs/verification.md; here the counting code runs with the CPU-side counter, the
profiler path runs on CPU, and the script refuses cleanly where there is no CUDA.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.slow
def test_transfer_table_on_cpu_shows_fewer_conversions_after_the_fix(tmp_path):
    out = tmp_path / "transfers.md"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "transfer_table.py"), "--jobs", "2", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    rows = [r for r in out.read_text().splitlines() if r.startswith("| DL")]
    codes = {r.split("/")[0].strip("| ") for r in rows}
    assert codes == {"DL003", "DL007", "DL008"}
    measured = [r for r in rows if "needs a GPU" not in r]
    assert measured and not any("NOT FEWER" in r for r in measured)
    for r in measured:
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert int(cells[2]) < int(cells[1]), r


def test_counter_profiler_path_runs_on_cpu(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import torch\nx = torch.ones(3)\nfor _ in range(4):\n    v = x.sum().item()\nprint(v)\n")
    counts = tmp_path / "c.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "transfer_counter.py"), str(prog),
                           "--out", str(counts), "--cuda-profile"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "3.0"
    data = json.loads(counts.read_text())
    assert data["by_method"].get("item") == 4
    assert data["memcpy_htod"] == 0 and data["memcpy_dtoh"] == 0  # a CPU run copies nothing


def test_verify_script_refuses_without_cuda(tmp_path):
    if _cuda():
        pytest.skip("CUDA is present: scripts/verify_cuda.sh would run for real")
    out = tmp_path / "verify-out"
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "verify_cuda.sh")], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, OUT=str(out)))
    assert proc.returncode == 3
    assert "no CUDA device visible" in proc.stderr
    assert not out.exists(), "nothing verified, so no results folder either"


def test_verify_script_plans_resumable_chunks_without_cuda(tmp_path):
    """The GPU run is cut in chunks that fit a 10-minute command (one per rule directory,
    the other CUDA tests, the copy table); a chunk already passed is not run again."""
    out = tmp_path / "verify-out"
    env = dict(os.environ, OUT=str(out), VERIFY_PLAN="1")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "verify_cuda.sh")], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    plan = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    rules = sorted(p.name for p in (ROOT / "tests" / "fixtures").glob("DL*") if p.is_dir())
    assert list(plan) == [*rules, "other", "transfers"]
    assert set(plan.values()) == {"to run"}
    (out / "chunks").mkdir(parents=True)
    (out / "chunks" / "DL002.status").write_text("passed\n")
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "verify_cuda.sh"), "DL002", "DL005"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.stdout.splitlines() == ["DL002: passed", "DL005: to run"]


def _collected(args: list) -> set:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "cuda", *args], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode in (0, 5), proc.stdout[-2000:] + proc.stderr[-2000:]
    return {ln for ln in proc.stdout.splitlines() if "::" in ln}


def test_every_cuda_test_falls_in_one_chunk():
    """A first GPU run found the `other` chunk selecting nothing (`-k "not DL0"` matched the test
    files' own names): the chunks' selections must cover the CUDA tests, each test once."""
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "verify_cuda.sh")], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, VERIFY_PLAN="selection"), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    chunks = dict(line.split("\t", 1) for line in proc.stdout.splitlines())
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                   if "mark.cuda" in p.read_text(encoding="utf-8"))
    everything = _collected(files)
    # the rule chunks' ids are disjoint by construction (`DL001/` ...): one collection for them all
    rules = _collected(["-k", " or ".join(v for k, v in chunks.items() if k != "other"), *files])
    other = _collected(["-k", chunks["other"], *files])
    assert other, "the `other` chunk selects no test"
    assert not rules & other
    assert rules | other == everything
