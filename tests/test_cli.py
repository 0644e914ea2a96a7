"""The command line as a user drives it: exit codes, formats, selection, fix/diff."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from devlint import __version__
from devlint.cli import main

GPU_ONLY = (
    "import torch\n"
    "x = torch.randn(4, 4).cuda()\n"
    "y = torch.zeros(4, device='cuda')\n"
    "print((x + y).sum().item())\n"
)
DISCARDED = "import torch\nx = torch.ones(3)\nx.double()\nprint(x.dtype)\n"
CLEAN = "import torch\nx = torch.ones(3)\nprint(x.sum().item())\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "gpu.py").write_text(GPU_ONLY)
    (tmp_path / "discard.py").write_text(DISCARDED)
    (tmp_path / "clean.py").write_text(CLEAN)
    venv = tmp_path / ".venv" / "lib"
    venv.mkdir(parents=True)
    (venv / "ignored.py").write_text(GPU_ONLY)  # hidden dirs and virtualenvs are skipped
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def run12(*args):
    """The core two rules only, so later rules don't change these expectations."""
    return run("--select", "DL001,DL002", *args)


def test_version():
    r = run("--version")
    assert r.exit_code == 0 and __version__ in r.output


def test_check_reports_findings_with_locations_and_summary(project):
    r = run("check", "--select", "DL001,DL002")
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert "gpu.py:2:5: [*] DL002 `.cuda()` hard-codes the CUDA device: raises on a machine without CUDA" in lines
    assert any(l.startswith("gpu.py:3:") and "DL002" in l for l in lines)
    assert any(l.startswith("discard.py:3:1: [*] DL001") for l in lines)
    assert "ignored.py" not in r.output
    assert lines[-1] == "Found 3 findings (3 fixable with --fix)."


def test_default_command_is_check(project):
    assert run("gpu.py").output == run("check", "gpu.py").output


def test_clean_file_exits_zero(project):
    r = run("clean.py")
    assert r.exit_code == 0
    assert r.output.strip() == "All checks passed."


def test_exit_zero(project):
    assert run("--exit-zero", "gpu.py").exit_code == 0


def test_select_ignore_prefix_and_all(project):
    assert "DL001" not in run("--select", "DL002", ".").output
    assert "DL002" not in run("--ignore", "DL002", ".").output
    assert "DL001" in run("--select", "DL00", ".").output
    assert "DL002" in run("--select", "ALL", "--ignore", "DL001", ".").output
    r = run("--select", "DL001,DL002", ".")
    assert "DL001" in r.output and "DL002" in r.output


def test_unknown_rule_is_a_usage_error(project):
    r = CliRunner().invoke(main, ["--select", "DL999", "."])
    assert r.exit_code == 2
    assert "unknown rule selector 'DL999'" in r.output
    assert "Traceback" not in r.output


def test_missing_path_is_an_error_but_other_files_are_still_linted(project):
    r = CliRunner().invoke(main, ["nope.py", "gpu.py"])
    assert r.exit_code == 2
    assert "devlint: error: nope.py: no such file or directory" in r.output
    assert "gpu.py:2:5" in r.output


def test_json_output(project):
    r = run12("--output-format", "json", "gpu.py")
    items = json.loads(r.output)
    assert r.exit_code == 1
    assert [i["line"] for i in items] == [2, 3]
    first = items[0]
    assert set(first) >= {"code", "name", "message", "filename", "line", "column", "end_line",
                          "end_column", "fix", "fixable"}
    assert first["code"] == "DL002" and first["name"] == "hardcoded-cuda"
    assert (first["column"], first["end_column"]) == (5, 29)  # 1-based, end one past the end
    assert first["fix"]["applicability"] == "safe" and first["fixable"] is True


def test_diff_prints_and_writes_nothing(project):
    before = (project / "gpu.py").read_text()
    r = run12("--diff", "gpu.py")
    assert r.exit_code == 1
    assert "-x = torch.randn(4, 4).cuda()" in r.output
    assert "+x = torch.randn(4, 4).to(device)" in r.output
    assert (project / "gpu.py").read_text() == before


def test_fix_writes_and_reports(project):
    r = run12("--fix", ".")
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[-1] == "Found 3 findings (3 fixed, 0 remaining)."
    fixed = (project / "gpu.py").read_text()
    # the file writes its strings with single quotes: so does the inserted device variable
    assert "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')" in fixed
    assert "x = x.double()" in (project / "discard.py").read_text()
    assert run12(".").exit_code == 0  # nothing left


def test_inserted_device_variable_follows_the_files_quotes(project):
    (project / "dq.py").write_text('import torch\nx = torch.zeros(4, device="cuda")\nprint(x.sum().item(), "ok")\n')
    (project / "sq.py").write_text("import torch\nx = torch.zeros(4).cuda()\nprint(x.sum().item(), 'ok')\n")
    run12("--fix", "--unsafe-fixes", "dq.py", "sq.py")
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in (project / "dq.py").read_text()
    assert "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')" in (project / "sq.py").read_text()


def test_unsafe_fixes_are_counted_and_opt_in(project):
    (project / "idx.py").write_text("import torch\nx = torch.ones(2).cuda(1)\n")
    r = run12("idx.py")
    assert "0 fixable with --fix, 1 more with --unsafe-fixes" in r.output
    run12("--fix", "idx.py")
    assert ".cuda(1)" in (project / "idx.py").read_text()
    run12("--fix", "--unsafe-fixes", "idx.py")
    assert ".to(device)" in (project / "idx.py").read_text()


def test_fix_preserves_permissions_and_crlf(project):
    p = project / "crlf.py"
    p.write_bytes(b"import torch\r\n# keep me\r\nx = torch.ones(2).cuda()  # and me\r\n")
    os.chmod(p, 0o751)
    run12("--fix", "crlf.py")
    data = p.read_bytes()
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert b"# keep me" in data and b"# and me" in data
    assert os.stat(p).st_mode & 0o777 == 0o751


def test_rules_and_rule_docs():
    r = run("rules")
    assert r.exit_code == 0
    assert any(l.startswith("DL001") and "unassigned-transfer" in l for l in r.output.splitlines())
    doc = run("rule", "DL002")
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
        assert section in doc.output
    bad = CliRunner().invoke(main, ["rule", "DL999"])
    assert bad.exit_code == 2 and "unknown rule" in bad.output
