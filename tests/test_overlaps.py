"""One expression, one finding: where rules overlap (devlint.engine.SUBSUMES) the user
sees one finding, a `# noqa` naming any of the codes silences it, and the counts the
lint run promises are what `--fix` then does -- never applying an unsafe fix."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from devlint.cli import main

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


def run(*args):
    return CliRunner().invoke(main, [*args, "--no-cache", "--output-format", "concise"], catch_exceptions=False)


def findings(path, *extra):
    r = CliRunner().invoke(main, ["check", "--no-cache", "--select", "ALL", "--output-format", "json",
                                  *extra, str(path)], catch_exceptions=False)
    return json.loads(r.output)


def write(tmp_path, monkeypatch, text, name="train.py"):
    (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return name


def test_host_alloc_then_cuda_is_one_finding(tmp_path, monkeypatch):
    f = write(tmp_path, monkeypatch, "import torch\n\nx = torch.zeros(3).cuda()\nprint(x)\n")
    r = run("check", f)
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0].startswith("train.py:3:5: [*] DL007 `torch.zeros(...)` is allocated on the host")
    assert "(also DL002: `.cuda()` hard-codes the CUDA device: raises on a machine without CUDA)" in lines[0]
    assert lines[1:] == ["Found 1 finding (1 fixable with --fix)."]
    r = run("check", "--fix", f)
    assert r.output.splitlines()[-2:] == ["Fixed train.py (1 finding).", "Found 1 finding (1 fixed, 0 remaining)."]
    assert "x = torch.zeros(3, device=device)\n" in (tmp_path / f).read_text()


def test_discarded_cuda_statement_is_one_finding_and_the_fix_runs_to_the_end(tmp_path, monkeypatch):
    f = write(tmp_path, monkeypatch, "import torch\n\ny = torch.ones(2)\ny.cuda()\nprint(y.device)\n")
    r = run("check", "--select", "ALL", f)
    assert [ln.split(" ", 3)[:3] for ln in r.output.splitlines()[:-1]] == [["train.py:4:1:", "[*]", "DL001"]]
    assert "also DL002" in r.output
    r = run("check", "--select", "ALL", "--fix", f)
    assert r.exit_code == 0, r.output
    assert "y = y.to(device)\n" in (tmp_path / f).read_text()  # both problems gone


@pytest.mark.parametrize("noqa", ["DL002", "DL007", "DL002, DL007"])
def test_noqa_naming_any_overlapping_code_suppresses_the_finding(tmp_path, monkeypatch, noqa):
    f = write(tmp_path, monkeypatch, f"import torch\n\nx = torch.zeros(3).cuda()  # noqa: {noqa}\n")
    r = run("check", "--extend-select", "DL100", f)
    assert r.exit_code == 0, r.output
    assert r.output == "All checks passed.\n"


def test_noqa_for_another_code_does_not_suppress(tmp_path, monkeypatch):
    f = write(tmp_path, monkeypatch, "import torch\n\nx = torch.zeros(3).cuda()  # noqa: DL001\n")
    r = run("check", f)
    assert r.exit_code == 1 and "DL007" in r.output


def test_unrelated_call_in_the_arguments_is_its_own_finding(tmp_path, monkeypatch):
    f = write(tmp_path, monkeypatch, "import torch\n\ny = torch.ones(2)\ny.to(torch.ones(1).cuda().device)\n")
    found = [(d["code"], d["column"], d.get("also")) for d in findings(tmp_path / f)]
    # the statement is DL001; the `.cuda()` inside its argument is another problem (DL007+DL002)
    assert found == [("DL001", 1, None), ("DL007", 6, ["DL002"])], found


SUMMARY_LINT = re.compile(r"^Found (\d+) findings? \((\d+) fixable with --fix"
                          r"(?:, (\d+) more with --unsafe-fixes)?\)\.$")
SUMMARY_FIX = re.compile(r"^Found (\d+) findings? \((\d+) fixed, (\d+) remaining\)\.$")


def _real_programs():
    unsafe = sorted(p.parent / "before.py" for p in FIXTURES.glob("*/*/case.toml")
                    if re.search(r"(?m)^unsafe\s*=\s*true", p.read_text()))
    assert len(unsafe) >= 10
    return [REPO / "examples" / "legacy_gpu_train.py", *unsafe]


@pytest.mark.parametrize("src", _real_programs(), ids=lambda p: "/".join(p.parts[-3:-1]))
def test_fixable_count_is_what_fix_fixes_and_plain_fix_applies_no_unsafe_fix(tmp_path, monkeypatch, src):
    f = tmp_path / "prog.py"
    shutil.copyfile(src, f)
    monkeypatch.chdir(tmp_path)
    lint = run("check", "--select", "ALL", "prog.py").output.splitlines()[-1]
    m = SUMMARY_LINT.match(lint)
    if m is None:
        assert lint == "All checks passed."
        return
    promised = int(m.group(2))
    unsafe_before = Counter((d["code"], d["message"]) for d in findings(f)
                            if d["fix"] and d["fix"]["applicability"] == "unsafe")
    original = f.read_bytes()
    out = run("check", "--select", "ALL", "--fix", "prog.py").output.splitlines()
    m = SUMMARY_FIX.search(out[-1]) or SUMMARY_FIX.search(out[-2])
    assert m, out[-3:]
    assert int(m.group(2)) == promised, (lint, out[-2:])
    assert (f.read_bytes() != original) == (promised > 0)
    # every unsafe fix is still there to apply: plain --fix applied none of them
    unsafe_after = Counter((d["code"], d["message"]) for d in findings(f)
                           if d["fix"] and d["fix"]["applicability"] == "unsafe")
    assert not unsafe_before - unsafe_after, unsafe_before - unsafe_after
