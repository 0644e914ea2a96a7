"""Suppressions through the real CLI: `# noqa`, `# devlint: noqa`, DL100, --add-noqa, baselines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from devlint.cli import main


def run(args, cwd: Path, monkeypatch):
    monkeypatch.chdir(cwd)
    # these tests exercise DL001/DL002 on `torch.ones(2).cuda()` lines, which DL007
    # (host-alloc-then-move) rightly flags too: keep it out of their expectations
    if args and args[0] in ("rules", "rule", "clean"):
        return CliRunner().invoke(main, args, catch_exceptions=False)
    return CliRunner().invoke(main, [*args, "--ignore", "DL007"], catch_exceptions=False)


FINDING = re.compile(r"^\S+:(\d+):\d+: (?:\[\*\] )?(DL\d{3}) ")  # not the source snippets under it


def lines_with(output: str, code: str) -> list[int]:
    found = (FINDING.match(line) for line in output.splitlines())
    return sorted(int(m.group(1)) for m in found if m and m.group(2) == code)


NOQA_SRC = """\
import torch

a = torch.ones(2).cuda()  # noqa: DL002
b = torch.ones(2).cuda()  # noqa: E501
c = torch.ones(2).cuda()  # noqa
d = torch.ones(2).cuda()  # NOQA:DL001,DL002
e = torch.ones(2).cuda()  # type: ignore  # noqa: DL002 -- checked by hand
s = "# noqa: DL002"; f = torch.ones(2).cuda()
g = torch.ones(2).cuda()  # noqa: DL001
h = torch.ones(2).cuda()
"""


def test_line_noqa_forms(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text(NOQA_SRC)
    res = run(["check", "m.py"], tmp_path, monkeypatch)
    # E501 belongs to another tool; a noqa inside a string is no comment; DL001 is another rule
    assert lines_with(res.output, "DL002") == [4, 8, 9, 10]
    assert res.exit_code == 1


def test_suppressed_findings_are_not_fixed(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text(NOQA_SRC)
    res = run(["check", "--fix", "m.py"], tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    fixed = (tmp_path / "m.py").read_text().splitlines()
    by_name = {re.search(r"(\w) = torch\.ones", line).group(1): line for line in fixed if " = torch.ones" in line}
    for name in "acde":
        assert ".cuda()" in by_name[name], by_name[name]
    for name in "bfgh":
        assert ".to(device)" in by_name[name], by_name[name]
    cst.parse_module((tmp_path / "m.py").read_text())


def test_file_level_directives(tmp_path, monkeypatch):
    body = "import torch\n\ny = torch.ones(2)\ny.float()\nz = torch.ones(2).cuda()\n"
    (tmp_path / "all.py").write_text("# devlint: noqa\n" + body)
    (tmp_path / "one.py").write_text(body + "\n# devlint: noqa: DL002\n")
    (tmp_path / "inline.py").write_text(body.replace("y.float()", "y.float()  # devlint: noqa"))
    res = run(["check", "all.py"], tmp_path, monkeypatch)
    assert res.exit_code == 0 and "All checks passed." in res.output
    res = run(["check", "one.py"], tmp_path, monkeypatch)
    assert lines_with(res.output, "DL001") == [4] and lines_with(res.output, "DL002") == []
    # only a comment on its own line is a file directive
    res = run(["check", "inline.py"], tmp_path, monkeypatch)
    assert lines_with(res.output, "DL002") == [5]
    run(["check", "--fix", "one.py", "all.py"], tmp_path, monkeypatch)
    assert ".cuda()" in (tmp_path / "one.py").read_text() and ".cuda()" in (tmp_path / "all.py").read_text()


def test_unused_noqa_is_off_by_default_and_reported_when_selected(tmp_path, monkeypatch):
    src = ("import torch\n\n"
           "a = torch.ones(2)  # noqa: DL002\n"           # stale devlint code
           "b = torch.ones(2)  # noqa\n"                  # bare: may be another linter's
           "c = torch.ones(2)  # noqa: E501\n"            # another tool's code
           "d = torch.ones(2).cuda()  # noqa: DL002\n"    # used
           "e = torch.ones(2).cuda()  # noqa: DL002, DL001\n"  # DL001 part unused
           "f = torch.ones(2)  # noqa: DL008\n")          # DL008 not selected: cannot judge
    (tmp_path / "m.py").write_text(src)
    res = run(["check", "m.py"], tmp_path, monkeypatch)
    assert res.exit_code == 0 and "DL100" not in res.output
    res = run(["check", "--extend-select", "DL100", "m.py"], tmp_path, monkeypatch)
    assert lines_with(res.output, "DL100") == [3, 7]
    assert "unused `# noqa` code: DL001" in res.output
    assert res.exit_code == 1
    (tmp_path / "clean.py").write_text("import os\n# devlint: noqa: DL002\nprint(os.sep)\n")
    res = run(["check", "--extend-select", "DL100", "clean.py"], tmp_path, monkeypatch)
    assert lines_with(res.output, "DL100") == [2]


ADD_NOQA_SRC = """\
import torch

x = torch.ones(2).cuda()
y = torch.ones(2).cuda()  # move to GPU
z = torch.ones(2).cuda()  # noqa: E501
w = torch.ones(2)
w.float()
t = torch.ones(2).cuda(); s = \"\"\"text
more\"\"\"
u = [torch.ones(1).cuda(),
     torch.zeros(1).cuda()]
"""


def test_add_noqa_then_only_new_violations_fail(tmp_path, monkeypatch):
    (tmp_path / "old.py").write_text(ADD_NOQA_SRC)
    res = run(["check", "--add-noqa", "old.py"], tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    text = (tmp_path / "old.py").read_text()
    lines = text.splitlines()
    assert lines[2] == "x = torch.ones(2).cuda()  # noqa: DL002"
    assert lines[3] == "y = torch.ones(2).cuda()  # move to GPU  # noqa: DL002"
    assert lines[4] == "z = torch.ones(2).cuda()  # noqa: E501, DL002"
    assert lines[6] == "w.float()  # noqa: DL001"
    assert lines[7] == 't = torch.ones(2).cuda(); s = """text', "a comment there would enter the string"
    assert lines[9] == "u = [torch.ones(1).cuda(),  # noqa: DL002"
    assert lines[10] == "     torch.zeros(1).cuda()]  # noqa: DL002"
    assert "1 finding(s) could not be suppressed inline" in res.output
    cst.parse_module(text)
    # idempotent
    run(["check", "--add-noqa", "old.py"], tmp_path, monkeypatch)
    assert (tmp_path / "old.py").read_text() == text
    # the one unsuppressible finding is left; everything else passes
    res = run(["check", "old.py"], tmp_path, monkeypatch)
    assert lines_with(res.output, "DL002") == [8]
    # a new violation fails
    (tmp_path / "old.py").write_text(text.replace("w = torch.ones(2)\n", "w = torch.ones(2)\nv = w.cuda()\n"))
    res = run(["check", "--ignore", "DL001", "old.py"], tmp_path, monkeypatch)
    assert lines_with(res.output, "DL002") == [7, 9]


def test_add_noqa_keeps_crlf_line_endings(tmp_path, monkeypatch):
    p = tmp_path / "win.py"
    p.write_bytes(b"import torch\r\n\r\nx = torch.ones(2).cuda()\r\n")
    run(["check", "--add-noqa", "win.py"], tmp_path, monkeypatch)
    assert p.read_bytes() == b"import torch\r\n\r\nx = torch.ones(2).cuda()  # noqa: DL002\r\n"


GPU = "import torch\n\nx = torch.ones(2).cuda()\ny = torch.zeros(2).cuda()\n"


def test_baseline_survives_line_shifts_and_catches_new_findings(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(GPU)
    res = run(["check", "--baseline", "devlint-baseline.json", "--write-baseline", "pkg"], tmp_path, monkeypatch)
    assert res.exit_code == 0 and "Wrote 2 findings" in res.output
    data = json.loads((tmp_path / "devlint-baseline.json").read_text())
    assert {e["path"] for e in data["findings"]} == {"pkg/m.py"}
    assert {e["code"] for e in data["findings"]} == {"DL002"}
    res = run(["check", "--baseline", "devlint-baseline.json", "pkg"], tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    # unrelated edits shift the lines: still baselined (run from another directory, too)
    (tmp_path / "pkg" / "m.py").write_text("# header\nimport os\n" + GPU + "z = torch.ones(3).cuda()\n")
    res = run(["check", "--baseline", "../devlint-baseline.json", "m.py"], tmp_path / "pkg", monkeypatch)
    assert lines_with(res.output, "DL002") == [7]
    # baselined findings are not fixed either
    run(["check", "--baseline", "devlint-baseline.json", "--fix", "pkg"], tmp_path, monkeypatch)
    text = (tmp_path / "pkg" / "m.py").read_text()
    assert "x = torch.ones(2).cuda()" in text and "z = torch.ones(3).to(device)" in text


@pytest.mark.parametrize("content,fragment", [
    ("{not json", "invalid JSON"),
    ('{"findings": []}', "not a devlint baseline"),
    ('{"devlint-baseline": 1, "findings": [{"path": 1}]}', "malformed baseline entry"),
])
def test_bad_baseline_exits_2(tmp_path, monkeypatch, content, fragment):
    (tmp_path / "m.py").write_text(GPU)
    (tmp_path / "b.json").write_text(content)
    res = run(["check", "--baseline", "b.json", "m.py"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and fragment in res.output and "b.json" in res.output


# ---- the comment scanner agrees with tokenize ----------------------------------------------

def _tokenize_comments(source: bytes) -> list:
    import io
    import tokenize

    out, last_row_with_code = [], 0
    try:
        for tok in tokenize.tokenize(io.BytesIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.start[1], tok.string, last_row_with_code != tok.start[0]))
            elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                  tokenize.ENCODING):
                last_row_with_code = tok.end[0]
    except (tokenize.TokenError, SyntaxError):
        return None
    return out


TRICKY = [
    b'x = "# noqa: DL002"  # noqa: DL001\n',
    b"s = '''\n# noqa: DL002\n'''  # real\n",
    b's = """a\\"""\n# noqa\n"""\n',
    b"s = 'it\\'s # not'  # it's a comment\n",
    b's = "a\\\nb # still a string"\n# noqa\n',
    b'x = 1\r\n# noqa: DL002\r\ny = "#"  # noqa\r\n',
    b"f = f'{x}#'  # c\nb = rb'\\'#'  # d\n",
    b'    # devlint: noqa\n  x = (1,  # inner\n       2)\n',
    b"s = ''  # e\nt = \"\"  # f\n",
    b'u = "\xc3\xa9t\xc3\xa9"  # g\n',
]


@pytest.mark.parametrize("source", TRICKY, ids=range(len(TRICKY)))
def test_comment_scanner_agrees_with_tokenize(source):
    from devlint.suppression import _comments

    assert list(_comments(source)) == _tokenize_comments(source)


def test_comment_scanner_agrees_with_tokenize_on_the_torch_sources():
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    from devlint.suppression import _comments

    root = Path(list(spec.submodule_search_locations)[0])
    checked = 0
    for p in sorted(root.rglob("*.py")):
        source = p.read_bytes()
        if b"noqa" not in source:
            continue
        expected = _tokenize_comments(source)
        if expected is None:
            continue
        assert list(_comments(source)) == expected, p
        checked += 1
    assert checked > 100
