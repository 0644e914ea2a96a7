"""The DL003 fixes reduce host<->device traffic, measured by running the programs.

For every fixture whose case.toml says ``fewer_transfers = true``: before.py and
after.py run under tests/transfer_counter.py; the fixed program executes strictly
fewer conversions and prints the same result. Where CUDA is present the profiler's
memcpy counts must not grow either.
"""

from __future__ import annotations

import textwrap

import pytest

from fixtures_lib import discover_cases
from transfer_counter import count_program

FEWER = [c for c in discover_cases() if c.extra.get("fewer_transfers")]


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def test_some_fixtures_measure_transfers():
    assert len(FEWER) >= 3


@pytest.mark.parametrize("case", FEWER, ids=[c.id for c in FEWER])
def test_fix_does_fewer_transfers_and_prints_the_same(case):
    if case.before == "crash":
        pytest.skip("before.py needs a GPU to run at all; the CUDA test measures it")
    before, cb = count_program(case.before_path)
    after, ca = count_program(case.after_path)
    assert before.returncode == 0, before.stderr[-2000:]
    assert after.returncode == 0, after.stderr[-2000:]
    assert before.stdout == after.stdout
    assert ca["conversions"] < cb["conversions"], (cb, ca)


@pytest.mark.cuda
@pytest.mark.parametrize("case", FEWER, ids=[c.id for c in FEWER])
def test_fix_does_fewer_memcpys_on_cuda(case):
    if not _cuda_available():
        pytest.skip("CUDA is not available on this machine (the CPU counts still ran)")
    before, cb = count_program(case.before_path, cuda=True)
    after, ca = count_program(case.after_path, cuda=True)
    assert before.returncode == 0 and after.returncode == 0, (before.stderr[-2000:], after.stderr[-2000:])
    assert cb["cuda"] and ca["cuda"]
    assert ca["memcpy_htod"] + ca["memcpy_dtoh"] < cb["memcpy_htod"] + cb["memcpy_dtoh"], (cb, ca)
    assert ca["conversions"] < cb["conversions"], (cb, ca)


def test_counter_counts_what_runs(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import torch
        x = torch.ones(3)
        for i in range(4):
            y = x.cpu()            # 4 x cpu
            v = y.sum().item()     # 4 x item
        z = x.to(torch.float64)    # dtype only: not a transfer
        w = x.to("cpu")            # 1 x to
        t = torch.tensor([1.0], device="cpu")  # 1 x tensor(device=)
        print(v, z.dtype, w.shape, t.shape, x.tolist())  # 1 x tolist
    """))
    proc, counts = count_program(prog)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3.0 torch.float64 torch.Size([3]) torch.Size([1]) [1.0, 1.0, 1.0]"
    assert counts["by_method"] == {"cpu": 4, "item": 4, "to": 1, "tensor": 1, "tolist": 1}
    assert counts["to_host"] == 9 and counts["to_device"] == 2 and counts["conversions"] == 11
    assert counts["cuda"] is False


def test_counter_reports_a_failing_program(tmp_path):
    prog = tmp_path / "bad.py"
    prog.write_text("import torch\nraise SystemExit('boom')\n")
    proc, counts = count_program(prog)
    assert proc.returncode != 0 and "boom" in proc.stderr
    assert counts is None
