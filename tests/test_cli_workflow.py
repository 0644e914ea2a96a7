"""The command line where users expect ruff's habits: errors that name the problem,
`--fix` that says what it did, colour and quiet switches, the full output format, the
help, completion, and a clear stop on an unsupported LibCST."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from clihelp import devlint_cmd, no_traceback, run_cli
from devlint import cli, libcst_compat
from devlint.cli import main

GPU = "import torch\n\nx = torch.ones(2)\ny = x.cuda()\nz = x.cuda(1)\nx.double()\nprint(x, y, z)\n"
CLEAN = "import torch\n\nprint(torch.ones(1))\n"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "gpu.py").write_text(GPU)
    (tmp_path / "clean.py").write_text(CLEAN)
    monkeypatch.chdir(tmp_path)
    for var in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def run(*args, **kw):
    return CliRunner().invoke(main, [*args], catch_exceptions=False, **kw)


# ---- errors --------------------------------------------------------------------------

def test_missing_path_is_an_error_not_a_pass(project):
    proc = run_cli("check", "nosuch.py", cwd=project)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "devlint: error: nosuch.py: no such file or directory"
    assert "All checks passed" not in proc.stdout
    proc = run_cli("check", "--statistics", "nosuch.py", cwd=project)
    assert proc.returncode == 2 and "All checks passed" not in proc.stdout


def test_mistyped_command_suggests_the_right_one(project):
    proc = run_cli("chekc", cwd=project)
    assert proc.returncode == 2
    assert "unknown command 'chekc'; did you mean 'check'?" in proc.stderr
    assert "no such file" not in proc.stderr
    no_traceback(proc)
    # a word that names a file or directory is still a path (`devlint src`)
    (project / "src").mkdir()
    (project / "src" / "a.py").write_text(CLEAN)
    assert run_cli("src", cwd=project).returncode == 0


# ---- --fix, --show-fixes, -q ----------------------------------------------------------

def test_fix_names_the_changed_files_and_what_unsafe_fixes_would_do(project):
    r = run("check", "--fix", "--no-cache", ".")
    assert r.exit_code == 1
    tail = r.output.splitlines()[-3:]
    assert tail == ["Fixed gpu.py (2 findings).",
                    "Found 3 findings (2 fixed, 1 remaining).",
                    "1 more finding fixable with --fix --unsafe-fixes."]
    assert "clean.py" not in r.output
    r = run("check", "--fix", "--unsafe-fixes", "--no-cache", ".")
    assert r.exit_code == 0 and r.output.splitlines()[-2:] == [
        "Fixed gpu.py (1 finding).", "Found 1 finding (1 fixed, 0 remaining)."]


def test_show_fixes_lists_fixes_per_file_and_rule(project):
    (project / "other.py").write_text("import torch\n\nw = torch.ones(2)\nw.float()\nprint(w)\n")
    r = run("check", "--fix", "--show-fixes", "--no-cache", ".")
    out = r.output
    block = out[out.index("Fixed 3 findings:"):].splitlines()
    assert block[:6] == ["Fixed 3 findings:",
                         "- gpu.py:",
                         "    1 × DL001 (unassigned-transfer)",
                         "    1 × DL002 (hardcoded-cuda)",
                         "- other.py:",
                         "    1 × DL001 (unassigned-transfer)"]


def test_quiet_prints_findings_only(project):
    r = run("check", "-q", "--output-format", "concise", "--no-cache", ".")
    assert r.exit_code == 1
    assert all(line.startswith("gpu.py:") for line in r.output.splitlines()), r.output
    assert run("check", "-q", "clean.py").output == ""
    assert run("check", "--quiet", "--fix", "--no-cache", "clean.py").output == ""


# ---- output formats --------------------------------------------------------------------

def test_full_format_is_the_default_and_underlines_the_finding(project):
    r = run("check", "--no-cache", "--select", "DL002", "gpu.py")
    lines = r.output.splitlines()
    i = lines.index("gpu.py:4:5: [*] DL002 `.cuda()` hard-codes the CUDA device: raises on a machine without CUDA")
    assert lines[i + 1:i + 6] == ["  |",
                                  "4 | y = x.cuda()",
                                  "  |     ^^^^^^^^ DL002",
                                  "  |",
                                  "  = help: use `.to(device)`"]
    concise = run("check", "--no-cache", "--select", "DL002", "--output-format", "concise", "gpu.py")
    assert concise.output.splitlines() == [
        "gpu.py:4:5: [*] DL002 `.cuda()` hard-codes the CUDA device: raises on a machine without CUDA",
        "gpu.py:5:5: DL002 `.cuda(i)` pins a CUDA device index: raises on a machine without CUDA",
        "Found 2 findings (1 fixable with --fix, 1 more with --unsafe-fixes)."]
    # `text`, the one-line format's old name, still works
    assert run("check", "--no-cache", "--select", "DL002", "--output-format", "text", "gpu.py").output \
        == concise.output


def test_full_format_shows_notebook_cells(project):
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": ["import torch\n"]},
                    {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                     "source": ["a = torch.ones(2)\n", "b = a.cuda()"]}],
          "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    (project / "nb.ipynb").write_text(json.dumps(nb))
    r = run("check", "--no-cache", "--select", "DL002", "nb.ipynb")
    assert "nb.ipynb:cell 2:2:5: [*] DL002" in r.output
    assert "2 | b = a.cuda()\n  |     ^^^^^^^^ DL002\n" in r.output


def test_json_gives_applicability_and_docs(project):
    items = json.loads(run("check", "--no-cache", "--output-format", "json", "gpu.py").output)
    by_line = {i["line"]: i for i in items}
    assert by_line[4]["fix"]["applicability"] == "safe" and by_line[4]["docs"] == "devlint rule DL002"
    assert by_line[5]["fix"]["applicability"] == "unsafe"


# ---- colour ----------------------------------------------------------------------------

def test_color_switches(project, monkeypatch):
    def colored(*args):
        return bool(ANSI.search(run("check", "--no-cache", "--diff", *args, "gpu.py").output))

    assert not colored()  # not a terminal
    assert colored("--color", "always")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert colored()
    assert not colored("--color", "never")
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colored()
    assert colored("--color", "always")  # an explicit choice wins


def test_diff_is_colored_line_by_line(project):
    out = run("check", "--no-cache", "--diff", "--color", "always", "gpu.py").output
    assert "\x1b[32m+y = x.to(device)\x1b[0m" in out
    assert "\x1b[31m-y = x.cuda()\x1b[0m" in out
    assert ANSI.sub("", out).count("+y = x.to(device)") == 1


# ---- progress ------------------------------------------------------------------------

def test_progress_on_a_terminal_only(project, monkeypatch):
    for i in range(5):
        (project / f"m{i}.py").write_text(CLEAN)
    args = ["check", "--no-cache", "-j", "1", "."]
    r = CliRunner().invoke(main, args)
    assert "files" not in r.stderr  # stderr is no terminal here: no progress
    monkeypatch.setattr(cli, "_isatty", lambda stream: stream is sys.stderr)
    monkeypatch.setattr(cli._progress, "DELAY", 0)
    monkeypatch.setattr(cli._progress, "EVERY", 0)
    r = CliRunner().invoke(main, args)
    assert "\rdevlint: 6/7 files" in r.stderr and r.stderr.endswith("\r\x1b[K")
    assert "devlint:" not in r.stdout
    r = CliRunner().invoke(main, [*args[:-1], "-q", "."])
    assert "files" not in r.stderr


# ---- rules, help, completion ----------------------------------------------------------

def test_rules_fix_column_and_json():
    lines = run("rules").output.splitlines()
    assert lines[0].split() == ["code", "on", "fix", "name", "summary"]
    dl9 = next(line for line in lines if line.startswith("DL009"))
    assert dl9.split()[:4] == ["DL009", "on", "unsafe", "unregistered-tensor-attribute"]
    rows = json.loads(run("rules", "--output-format", "json").output)
    by = {r["code"]: r for r in rows}
    assert by["DL000"]["fix"] == "none" and by["DL004"]["fix"] == "safe"
    assert by["DL008"]["default"] is False and by["DL002"]["name"] == "hardcoded-cuda"


def test_top_level_help_lists_the_check_options():
    out = run("--help").output
    assert "Check options" in out
    for opt in ("--fix", "--select", "--output-format", "--statistics", "--color", "--quiet", "--show-fixes"):
        assert opt in out, opt
    assert "devlint check --help" not in out


def test_shell_completion():
    env = {**os.environ, "_DEVLINT_COMPLETE": "bash_complete", "COMP_WORDS": "devlint ch", "COMP_CWORD": "1"}
    proc = subprocess.run(devlint_cmd(), env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["plain,check"]
    env.update(COMP_WORDS="devlint train.py --output-f", COMP_CWORD="2")
    proc = subprocess.run(devlint_cmd(), env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["plain,--output-format"]
    env["_DEVLINT_COMPLETE"] = "bash_source"
    proc = subprocess.run(devlint_cmd(), env=env, capture_output=True, text=True, timeout=60)
    assert "complete -o nosort -F _devlint_completion devlint" in proc.stdout


# ---- LibCST --------------------------------------------------------------------------

def test_unsupported_libcst_stops_with_one_line(project, monkeypatch):
    from libcst._nodes.internal import CodegenState

    monkeypatch.setattr(libcst_compat, "_checked", False)
    monkeypatch.delattr(CodegenState, "record_syntactic_position")
    r = CliRunner().invoke(main, ["check", "--no-cache", "gpu.py"])
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("devlint: error: LibCST ")
    assert "libcst._nodes.internal.CodegenState.record_syntactic_position" in lines[0]
    assert "pip install 'libcst>=1.1,<1.10'" in lines[0]
    assert r.stdout == ""


def test_the_pin_matches_the_compat_check():
    import tomllib
    from pathlib import Path

    deps = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"libcst{libcst_compat.SUPPORTED}" in deps


def test_no_deprecation_warning_on_the_command_line(project):
    proc = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-m", "devlint", "check",
                           "--no-cache", "--fix", "--show-fixes", "--statistics", "gpu.py"],
                          capture_output=True, text=True, cwd=project, timeout=120)
    assert "Warning" not in proc.stderr, proc.stderr
    assert proc.returncode == 1
