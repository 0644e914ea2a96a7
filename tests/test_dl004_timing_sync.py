"""The GPU-only timing script runs on CPU after `devlint --fix` and still synchronises on CUDA."""

from __future__ import annotations

import pytest

from fixtures_lib import FIXTURES
from transfer_counter import count_program

CASE = FIXTURES / "DL004" / "timing_loop_synchronize"


def test_fixed_timing_script_runs_on_cpu_without_synchronising():
    proc, counts = count_program(CASE / "after.py")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("checksum ") and "5 timings" in proc.stdout
    assert counts["syncs"] == 0 and counts["cuda"] is False


@pytest.mark.cuda
def test_fixed_timing_script_still_synchronises_on_cuda():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available on this machine (the CPU half ran)")
    before, cb = count_program(CASE / "before.py", cuda=True)
    after, ca = count_program(CASE / "after.py", cuda=True)
    assert before.returncode == 0 and after.returncode == 0, (before.stderr[-2000:], after.stderr[-2000:])
    assert ca["cuda"] and ca["syncs"] >= 5, ca  # one per timed iteration, as before the fix
    assert ca["syncs"] == cb["syncs"], (cb, ca)
    assert before.stdout == after.stdout
