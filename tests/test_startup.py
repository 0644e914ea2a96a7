"""`devlint check one_file.py` imports only what linting needs: never torch or numpy
(even for a file full of torch code), and no process pool for one file."""

from __future__ import annotations

import subprocess
import sys

import pytest

TORCH_CODE = """\
import numpy as np
import torch
from torch import nn

model = nn.Linear(4, 2).cuda()
x = torch.randn(8, 4, device="cuda")
x.to("cpu")
print(model(x).sum().item(), np.zeros(2))
"""


def _imported(args: list[str], cwd) -> tuple[set[str], subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "devlint", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)
    mods = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                mods.add(name)
    return mods, proc


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_one_file_check_imports_neither_torch_nor_numpy(tmp_path, cache):
    f = tmp_path / "train.py"
    f.write_text(TORCH_CODE)
    args = ["check", "--select", "ALL", "train.py"] + ([] if cache else ["--no-cache"])
    mods, proc = _imported(args, tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "DL002" in proc.stdout  # it really linted the file
    assert "libcst" in mods  # the importtime listing works
    heavy = {m for m in mods if m.split(".")[0] in {"torch", "numpy", "multiprocessing", "concurrent"}}
    assert heavy == set()


def test_warm_one_file_check_imports_neither(tmp_path):
    f = tmp_path / "train.py"
    f.write_text(TORCH_CODE)
    _imported(["check", "train.py"], tmp_path)
    mods, proc = _imported(["check", "train.py"], tmp_path)
    assert proc.returncode == 1 and "DL002" in proc.stdout
    assert not {m for m in mods if m.split(".")[0] in {"torch", "numpy"}}


def test_warm_cache_hit_does_not_import_libcst(tmp_path):
    """A warm run serves the file from the cache: no parse, so not even LibCST is imported."""
    (tmp_path / "train.py").write_text(TORCH_CODE)
    first, _ = _imported(["check", "train.py"], tmp_path)
    assert "libcst" in first
    mods, proc = _imported(["check", "train.py"], tmp_path)
    assert proc.returncode == 1 and "DL002" in proc.stdout
    assert not {m for m in mods if m.split(".")[0] == "libcst"}


def test_file_no_rule_could_flag_does_not_import_libcst(tmp_path):
    (tmp_path / "util.py").write_text("import os\n\nprint(os.getcwd())\n")
    mods, proc = _imported(["check", "--no-cache", "--select", "ALL", "util.py"],
                           tmp_path)
    assert proc.returncode == 0 and proc.stdout == "All checks passed.\n", proc.stderr
    assert not {m for m in mods if m.split(".")[0] == "libcst"}
    assert "difflib" not in mods  # only --diff needs it
