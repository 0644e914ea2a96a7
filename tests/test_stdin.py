"""Editor integration: `--stdin-filename NAME` reads the source from stdin; with `--fix`
the fixed source goes to stdout. Driven through the installed `devlint` in a subprocess,
as an editor would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

GPU = "import torch\n\nx = torch.ones(2).cuda()  # keep me\n"
FIXED = ('import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
         "x = torch.ones(2).to(device)  # keep me\n")


def devlint(args, stdin: bytes, cwd: Path) -> subprocess.CompletedProcess:
    # DL007 also flags the `torch.ones(2).cuda()` lines these tests use for DL002
    return subprocess.run([sys.executable, "-m", "devlint", *args, "--ignore", "DL007"], input=stdin, cwd=cwd,
                          capture_output=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})


def test_lint_from_stdin_reports_under_the_given_name(tmp_path):
    res = devlint(["check", "--stdin-filename", "pkg/train.py"], GPU.encode(), tmp_path)
    assert res.returncode == 1
    assert res.stdout.decode().splitlines()[0] == "pkg/train.py:3:5: [*] DL002 `.cuda()` hard-codes the CUDA device: raises on a machine without CUDA"
    assert not (tmp_path / "pkg").exists()


def test_fix_from_stdin_writes_fixed_source_to_stdout(tmp_path):
    (tmp_path / "train.py").write_text("on disk: untouched\n")
    res = devlint(["check", "--fix", "--stdin-filename", "train.py"], GPU.encode(), tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode() == FIXED
    assert (tmp_path / "train.py").read_text() == "on disk: untouched\n"
    # already clean: the same bytes come back
    res = devlint(["check", "--fix", "--stdin-filename", "train.py"], FIXED.encode(), tmp_path)
    assert res.returncode == 0 and res.stdout.decode() == FIXED


def test_fix_from_stdin_keeps_unparsable_source(tmp_path):
    broken = b"import torch\nx = torch.ones(2).cuda(\n"
    res = devlint(["check", "--fix", "--stdin-filename", "broken.py"], broken, tmp_path)
    assert res.stdout == broken
    assert res.returncode == 1 and b"DL000" in res.stderr


def test_stdin_honours_config_for_the_given_name(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.devlint]\nextend-exclude = ["legacy/"]\n\n[tool.devlint.per-file-ignores]\n"tests/*" = ["DL002"]\n')
    res = devlint(["check", "--stdin-filename", "tests/test_x.py"], GPU.encode(), tmp_path)
    assert res.returncode == 0, res.stdout
    res = devlint(["check", "--fix", "--force-exclude", "--stdin-filename", "legacy/old.py"], GPU.encode(), tmp_path)
    assert res.returncode == 0 and res.stdout.decode() == GPU  # excluded: passed through untouched
    res = devlint(["check", "--output-format", "json", "--stdin-filename", "legacy/old.py"], GPU.encode(), tmp_path)
    assert res.returncode == 1 and json.loads(res.stdout)[0]["filename"] == "legacy/old.py"


def test_notebook_from_stdin(tmp_path):
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": ["import torch\n", "x = torch.ones(2).cuda()"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    raw = (json.dumps(nb, indent=1) + "\n").encode()
    res = devlint(["check", "--stdin-filename", "nb.ipynb"], raw, tmp_path)
    assert res.returncode == 1 and "nb.ipynb:cell 1:2:5:" in res.stdout.decode()
    res = devlint(["check", "--fix", "--stdin-filename", "nb.ipynb"], raw, tmp_path)
    out = json.loads(res.stdout)
    assert out["cells"][0]["source"][-1] == "x = torch.ones(2).to(device)"


def test_stdin_rejects_paths(tmp_path):
    res = devlint(["check", "--stdin-filename", "a.py", "b.py"], b"", tmp_path)
    assert res.returncode == 2 and b"--stdin-filename" in res.stderr


def test_dash_reads_stdin_like_ruff(tmp_path):
    res = devlint(["check", "--output-format", "concise", "-"], GPU.encode(), tmp_path)
    assert res.returncode == 1, res.stderr
    assert res.stdout.decode().splitlines()[0] == "-:3:5: [*] DL002 `.cuda()` hard-codes the CUDA device: raises on a machine without CUDA"
    # the full format shows the line from stdin under the finding
    res = devlint(["check", "-"], GPU.encode(), tmp_path)
    assert "3 | x = torch.ones(2).cuda()  # keep me\n  |     ^^^^^^^^^^^^^^^^^^^^ DL002" in res.stdout.decode()
    res = devlint(["check", "--fix", "-"], GPU.encode(), tmp_path)
    assert res.returncode == 0 and res.stdout.decode() == FIXED
    res = devlint(["check", "-", "--stdin-filename", "pkg/x.py"], GPU.encode(), tmp_path)
    assert res.stdout.decode().startswith("pkg/x.py:3:5:")
    res = devlint(["check", "-", "other.py"], b"", tmp_path)
    assert res.returncode == 2 and b"stdin" in res.stderr
