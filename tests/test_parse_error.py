"""DL000: a file that does not parse is reported (exit 1) whatever it contains, and the
code is a rule code like any other for --select / --ignore / `devlint rule`."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from devlint.cli import main

NO_TORCH_BROKEN = "import os\n\ndef main(:\n    print(os.getcwd())\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "util.py").write_text(NO_TORCH_BROKEN)
    (tmp_path / "ok.py").write_text("import os\nprint(os.sep)\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args):
    return CliRunner().invoke(main, [*args, "--no-cache"], catch_exceptions=False)


@pytest.mark.parametrize("select", [[], ["--select", "DL002"], ["--select", "ALL"]])
def test_torch_free_file_with_a_syntax_error_is_dl000(project, select):
    r = run("check", "--output-format", "concise", *select, "util.py", "ok.py")
    assert r.exit_code == 1, r.output
    assert "All checks passed." not in r.output
    assert r.output.splitlines()[0] == "util.py:3:10: DL000 cannot parse: invalid syntax"


def test_undecodable_and_python2_files_are_dl000(project):
    (project / "latin.py").write_bytes(b"import os\nname = '\xe9t\xe9'\n")
    (project / "py2.py").write_text('print "hello"\n')
    r = run("check", "--output-format", "concise", "latin.py", "py2.py")
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0].startswith("latin.py:2:9: DL000 cannot parse: cannot decode as utf-8")
    assert lines[1].startswith("py2.py:1:1: DL000 cannot parse: Missing parentheses in call to 'print'")


def test_a_cookie_declared_encoding_parses(project):
    (project / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n")
    assert run("check", "latin.py").exit_code == 0


def test_dl000_is_a_selectable_ignorable_code(project):
    r = run("check", "--ignore", "DL000", "util.py")
    assert r.exit_code == 0 and "DL000" not in r.output
    # a prefix or ALL is about rules: it never hides unparsable files
    assert run("check", "--ignore", "DL00", "util.py").exit_code == 1
    r = run("check", "--select", "DL000", "--output-format", "concise", "util.py", "ok.py")
    assert r.exit_code == 1 and r.output.count("DL000") == 1
    (project / "pyproject.toml").write_text('[tool.devlint.per-file-ignores]\n"util.py" = ["DL000"]\n')
    assert run("check", "util.py").exit_code == 0


def test_rule_dl000_explains_itself():
    r = CliRunner().invoke(main, ["rule", "DL000"])
    assert r.exit_code == 0
    assert r.output.startswith("# DL000 parse-error")
    assert "## What it does" in r.output and "cannot parse" in r.output.lower()
    assert CliRunner().invoke(main, ["rule", "parse-error"]).output == r.output


def test_grammar_newer_than_the_running_python_is_no_parse_error(project):
    # PEP 695 (Python 3.12): CPython 3.11 refuses it, LibCST (devlint's parser) accepts it
    (project / "generic.py").write_text("def first[T](xs: list[T]) -> T:\n    return xs[0]\n")
    r = run("check", "generic.py")
    assert r.exit_code == 0 and r.output == "All checks passed.\n"
