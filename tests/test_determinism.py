"""Determinism and convergence: the same findings and fixes, byte for byte, whatever
PYTHONHASHSEED (and --jobs, where the option exists); nested and overlapping fixes
converge in one `--fix` run; a file whose fixes never settle is reported and left alone."""

from __future__ import annotations

import shutil

import libcst as cst
import pytest

from clihelp import no_traceback, run_cli
from devlint import registry, runner
from devlint.engine import MAX_FIX_ROUNDS, Settings
from devlint.rule import Rule, safe

SOURCES = {
    "train.py": (
        "import torch\nimport torch.nn as nn\n\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(4, 2)\n        self.scale = torch.ones(2)\n\n"
        "    def forward(self, x):\n        mask = torch.ones(x.shape[0], 2)\n"
        "        return self.fc(x) * mask * self.scale\n\n"
        "model = Net().cuda()\nckpt = torch.load('w.pt')\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(3):\n    x = torch.randn(8, 4).cuda()\n    loss = model(x).sum()\n"
        "    loss.backward()\n    x.cuda()\n    print(loss.item())\n"
    ),
    "nested.py": "import torch\nx = torch.ones(2)\ny = x.cuda().cuda()\nz = torch.zeros(3).cuda().to('cuda:0')\n"
                 "w = torch.stack([torch.zeros(3).cuda()]).cuda()\n",
    "utils/dev.py": "import torch\nDEV = torch.device('cuda')\n\ndef put(t):\n    return t.to(DEV)\n",
}


def _write(root):
    for name, text in SOURCES.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _jobs_supported() -> bool:
    proc = run_cli("check", "--help")
    return "--jobs" in proc.stdout


def _snapshot(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.py"))}


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_output_and_fixes_identical_across_hash_seeds_and_jobs(tmp_path, fmt):
    variants = [{"PYTHONHASHSEED": s} for s in ("0", "1", "12345", "random")]
    extra_args = [[]]
    if _jobs_supported():
        extra_args += [["--jobs", "1"], ["--jobs", "2"]]
    results = set()
    for env in variants:
        for extra in extra_args:
            root = tmp_path / f"run{len(results)}-{env['PYTHONHASHSEED']}-{len(extra)}"
            root.mkdir()
            _write(root)
            lint = run_cli("--select", "ALL", "--output-format", fmt, *extra, ".", cwd=root, env=env)
            fix = run_cli("--fix", "--unsafe-fixes", "--select", "ALL", "--output-format", fmt, *extra, ".",
                          cwd=root, env=env)
            no_traceback(lint)
            no_traceback(fix)
            results.add((lint.returncode, lint.stdout, lint.stderr, fix.returncode, fix.stdout, fix.stderr,
                         tuple(_snapshot(root).items())))
            shutil.rmtree(root)
    assert len(results) == 1, "output differs between runs"
    (lint_rc, lint_out, *_), = results
    assert lint_rc == 1 and "DL002" in lint_out


def test_nested_fixes_converge_in_one_run(tmp_path):
    _write(tmp_path)
    first = run_cli("--fix", "--select", "DL002", "nested.py", cwd=tmp_path)
    no_traceback(first)
    assert first.returncode == 0, first.stdout + first.stderr
    text = (tmp_path / "nested.py").read_text()
    assert ".cuda()" not in text and "'cuda:0'" not in text.replace("'cuda:0' if", "")
    assert "y = x.to(device).to(device)" in text
    again = run_cli("--fix", "--select", "DL002", "nested.py", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == "All checks passed.\n"
    assert (tmp_path / "nested.py").read_text() == text


class _Flip(Rule):
    """A rule whose fix undoes itself: `a` -> `b` -> `a` -> ..."""

    code = "DL999"
    name = "flip-flop"
    prefilter = __import__("re").compile(rb".")

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ("a", "b"):
            self.report(node, "flip", safe("flip", {node: cst.Name("b" if node.value == "a" else "a")}))


def test_file_that_does_not_converge_is_reported_and_left_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr(Settings, "rules", lambda self: (_Flip,))
    p = tmp_path / "osc.py"
    p.write_bytes(b"a = 1\n")
    res = runner.process_file(str(p), "osc.py", Settings(select=frozenset({"DL999"})), fix=True)
    assert res.error == f"fixes did not converge in {MAX_FIX_ROUNDS} rounds; file left unchanged"
    assert p.read_bytes() == b"a = 1\n"


class _Breaker(Rule):
    """A buggy rule whose fix produces code Python rejects (`return` at module level)."""

    code = "DL998"
    name = "breaker"
    prefilter = __import__("re").compile(rb"x")

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == "x":
            self.report(node, "break", safe("break", {node: cst.Return(cst.Name("y"))}))


def test_fix_that_breaks_the_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(Settings, "rules", lambda self: (_Breaker,))
    p = tmp_path / "b.py"
    p.write_bytes(b"x\n")
    res = runner.process_file(str(p), "b.py", Settings(select=frozenset({"DL998"})), fix=True)
    assert res.error.startswith("a fix produced code Python cannot compile ('return' outside function")
    assert p.read_bytes() == b"x\n"


class _Crasher(Rule):
    code = "DL997"
    name = "crasher"
    prefilter = __import__("re").compile(rb"boom")

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "boom":
            raise KeyError("boom")


def test_rule_crash_is_one_line_and_other_files_still_linted(tmp_path, monkeypatch):
    monkeypatch.setattr(Settings, "rules", lambda self: (_Crasher, *registry.all_rules()))
    (tmp_path / "c.py").write_bytes(b"boom = 1\n")
    res = runner.process_file(str(tmp_path / "c.py"), "c.py", Settings(select=frozenset({"DL997"})), fix=True)
    assert res.error.startswith("internal error (KeyError: 'boom' at ")
    assert res.error.endswith("file left unchanged; please report this devlint bug")
    assert (tmp_path / "c.py").read_bytes() == b"boom = 1\n"
