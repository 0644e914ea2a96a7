"""Hostile input through the real CLI: every bad file gets one line naming it and the
problem, the documented exit code (0 clean, 1 findings, 2 error), no traceback, and the
other files' findings stay intact. `--fix` leaves unparseable files byte-identical and
keeps encoding, BOM and line endings of the files it fixes."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from clihelp import no_traceback, run_cli

GOOD = b"import torch\nx = torch.ones(2).cuda()\n"
GOOD_LINE = re.compile(r"^good\.py:2:5: \[\*\] DL002 ", re.M)


def _lint(tmp_path, name, *extra, fix=False):
    args = ["--fix"] if fix else []
    if "--select" not in extra:
        # the expectations are DL002's (`.cuda()` -> `.to(device)`); DL007 would fold further
        args += ["--select", "DL001,DL002"]
    proc = run_cli(*args, *extra, name, "good.py", cwd=tmp_path)
    no_traceback(proc)
    return proc


def _lines_naming(proc, name):
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(name)
            or ln.startswith(f"devlint: error: {name}") or ln.startswith(f"devlint: warning: {name}")]


# (file name, content, the one line devlint prints for it)
UNPARSEABLE = [
    ("syntax.py", b"import torch\nx = torch.ones(2).cuda(\n",
     r"syntax\.py:2:23: DL000 cannot parse: '\(' was never closed"),
    ("py2.py", b"import torch\nprint \"hello\"\nx = torch.ones(2).cuda()\n",
     r"py2\.py:2:1: DL000 cannot parse: Missing parentheses in call to 'print'"),
    ("badutf8.py", b"import torch\ns = '\xff\xfe'\nx = torch.ones(2).cuda()\n",
     r"badutf8\.py:2:6: DL000 cannot parse: cannot decode as utf-8: invalid start byte at byte 18"),
    ("nul.py", b"import torch\nx = torch.ones(2).cuda()\x00\n",
     r"nul\.py:2:25: DL000 cannot parse: the file contains a NUL byte"),
    ("latin1_no_cookie.py", b"import torch\ns = 'caf\xe9'\nx = torch.ones(2).cuda()\n",
     r"latin1_no_cookie\.py:2:9: DL000 cannot parse: cannot decode as utf-8"),
    ("tabs_mixed.py", b"import torch\nif x:\n\ty = 1\n        x = torch.ones(2).cuda()\n",
     r"tabs_mixed\.py:4:\d+: DL000 cannot parse: TabError: inconsistent use of tabs and spaces"),
    ("indent.py", b"import torch\nif x:\n  y = 1\n    z = torch.ones(1).cuda()\n",
     r"indent\.py:4:\d+: DL000 cannot parse: IndentationError: unexpected indent"),
]


@pytest.mark.parametrize("name,content,message", UNPARSEABLE, ids=[c[0] for c in UNPARSEABLE])
def test_unparseable_file_is_one_dl000_line_and_fix_leaves_it_alone(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    (tmp_path / "good.py").write_bytes(GOOD)
    proc = _lint(tmp_path, name)
    assert proc.returncode == 1, proc.stderr
    lines = _lines_naming(proc, name)
    assert len(lines) == 1 and re.match(message, lines[0]), lines
    assert GOOD_LINE.search(proc.stdout), proc.stdout
    assert proc.stderr == ""

    proc = _lint(tmp_path, name, fix=True)
    assert proc.returncode == 1
    assert (tmp_path / name).read_bytes() == content, "--fix touched an unparseable file"
    assert b"torch.ones(2).to(device)" in (tmp_path / "good.py").read_bytes()


FIXED_LINE = b'x = torch.ones(2).to(device)'
DEVICE_LINE = b'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")'
DEVICE_LINE_SQ = DEVICE_LINE.replace(b'"', b"'")  # a file whose strings use single quotes

# (file name, content, expected bytes after --fix): encoding, BOM and line endings kept
PRESERVED = [
    ("latin1_cookie.py",
     b"# -*- coding: latin-1 -*-\nimport torch\ns = 'caf\xe9'\nx = torch.ones(2).cuda()\n",
     b"# -*- coding: latin-1 -*-\nimport torch\n\n" + DEVICE_LINE_SQ + b"\n\ns = 'caf\xe9'\n" + FIXED_LINE + b"\n"),
    ("crlf.py", b"import torch\r\nx = torch.ones(2).cuda()\r\n",
     b"import torch\r\n\r\n" + DEVICE_LINE + b"\r\n\r\n" + FIXED_LINE + b"\r\n"),
    ("mixed.py", b"import torch\r\nx = torch.ones(2).cuda()\ny = 1\r\n",
     b"import torch\r\n\r\n" + DEVICE_LINE + b"\r\n\r\n" + FIXED_LINE + b"\ny = 1\r\n"),
    ("tabs.py", b"import torch\nif True:\n\tx = torch.ones(2).cuda()  # keep\n",
     b"import torch\n\n" + DEVICE_LINE + b"\n\nif True:\n\t" + FIXED_LINE + b"  # keep\n"),
    ("bom.py", b"\xef\xbb\xbfimport torch\nx = torch.ones(2).cuda()\n",
     b"\xef\xbb\xbfimport torch\n\n" + DEVICE_LINE + b"\n\n" + FIXED_LINE + b"\n"),
    ("no_final_newline.py", b"import torch\nx = torch.ones(2).cuda()",
     b"import torch\n\n" + DEVICE_LINE + b"\n\n" + FIXED_LINE),
    ("utf8_text.py", "import torch\n# température ✓\nx = torch.ones(2).cuda()  # 東京\n".encode(),
     b"import torch\n\n" + DEVICE_LINE + "\n# température ✓\n".encode() + FIXED_LINE + "  # 東京\n".encode()),
]


@pytest.mark.parametrize("name,content,expected", PRESERVED, ids=[c[0] for c in PRESERVED])
def test_fix_preserves_encoding_bom_and_line_endings(tmp_path, name, content, expected):
    (tmp_path / name).write_bytes(content)
    (tmp_path / "good.py").write_bytes(GOOD)
    proc = _lint(tmp_path, name)
    assert proc.returncode == 1
    assert len(_lines_naming(proc, name)) == 1, proc.stdout
    proc = _lint(tmp_path, name, fix=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = (tmp_path / name).read_bytes()
    assert got == expected
    assert _lint(tmp_path, name, fix=True).returncode == 0
    assert (tmp_path / name).read_bytes() == expected, "a second --fix changed the file"


def test_empty_and_whitespace_only_files(tmp_path):
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "blank.py").write_bytes(b"\n\n   \n")
    (tmp_path / "good.py").write_bytes(GOOD)
    proc = run_cli("--fix", "empty.py", "blank.py", "good.py", cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 0 and proc.stderr == ""
    assert (tmp_path / "empty.py").read_bytes() == b""
    assert (tmp_path / "blank.py").read_bytes() == b"\n\n   \n"
    proc = run_cli("empty.py", "blank.py", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "All checks passed.\n"


DEEP = {
    # 300-deep nesting of different kinds; all of them beyond Python's default recursion
    # limit for LibCST's visitors, analysed on a big-stack thread
    "deep_calls.py": "x = torch.ones(1)" + ".float()" * 300 + ".cuda()\n",
    "deep_binop.py": "x = " + " + ".join(["torch.ones(1)"] * 300) + " + torch.ones(1).cuda()\n",
    "deep_unary.py": "x = " + "-" * 300 + "torch.ones(1).cuda()\n",
    # CPython itself refuses more than 200 nested brackets (see test_absurd_nesting...)
    "deep_parens.py": "x = " + "(" * 190 + "torch.ones(1).cuda()" + ")" * 190 + "\n",
    "deep_ifexp.py": "x = " + "1 if c else " * 300 + "torch.ones(1).cuda()\n",
}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_300_deep_nesting_is_analysed_and_fixed(tmp_path, name):
    src = ("import torch\n" + DEEP[name]).encode()
    (tmp_path / name).write_bytes(src)
    (tmp_path / "good.py").write_bytes(GOOD)
    proc = _lint(tmp_path, name, "--select", "DL002")
    assert proc.returncode == 1, proc.stderr
    lines = _lines_naming(proc, name)
    assert len(lines) == 1 and re.match(rf"{re.escape(name)}:2:\d+: \[\*\] DL002 ", lines[0]), lines
    assert GOOD_LINE.search(proc.stdout)
    proc = _lint(tmp_path, name, "--select", "DL002", fix=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = (tmp_path / name).read_bytes()
    assert out.count(b".to(device)") == 1 and b".cuda()" not in out
    assert out.replace(b".to(device)", b".cuda()").endswith(DEEP[name].encode())


# Far beyond what CPython accepts: LibCST's own parser can hang or crash on these, so
# devlint puts such files to CPython's compiler first and reports DL000 at once.
ABSURD = {
    "absurd_parens.py": ("x = " + "(" * 20000 + "t.cuda()" + ")" * 20000 + "\n", "too many nested parentheses"),
    "absurd_unary.py": ("x = " + "-" * 20000 + "t.cuda()\n", "too deeply nested to parse"),
    "absurd_chain.py": ("x = torch.ones(1)" + ".cuda()" * 20000 + "\n", "too deeply nested to parse"),
}


@pytest.mark.parametrize("name", sorted(ABSURD))
def test_absurd_nesting_is_refused_quickly_and_left_alone(tmp_path, name):
    content, message = ABSURD[name]
    src = ("import torch\n" + content).encode()
    (tmp_path / name).write_bytes(src)
    (tmp_path / "good.py").write_bytes(GOOD)
    proc = _lint(tmp_path, name, fix=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _lines_naming(proc, name) == [f"{name}:1:1: DL000 cannot parse: {message}"]
    assert (tmp_path / name).read_bytes() == src


def test_5mb_generated_file(tmp_path):
    # a generated module: a big table of string data plus a little code using torch
    rows = [f'    "{i:08d}:' + "abcdefghij" * 250 + '",' for i in range(2000)]
    src = ("import torch\n\nTABLE = (\n" + "\n".join(rows) + "\n)\n\nx = torch.ones(2).cuda()\n").encode()
    assert len(src) > 5_000_000
    (tmp_path / "gen.py").write_bytes(src)
    (tmp_path / "good.py").write_bytes(GOOD)
    proc = _lint(tmp_path, "gen.py")
    assert proc.returncode == 1
    assert [ln.split(" DL")[0] for ln in _lines_naming(proc, "gen.py")] == ["gen.py:2006:5: [*]"]
    proc = _lint(tmp_path, "gen.py", fix=True)
    assert proc.returncode == 0
    out = (tmp_path / "gen.py").read_bytes()
    assert out.endswith(b"\n" + FIXED_LINE + b"\n") and out.count(b"\n") == src.count(b"\n") + 2


def _can_drop_privileges() -> bool:
    return hasattr(os, "setuid") and os.geteuid() == 0


def test_unreadable_file(tmp_path):
    if os.geteuid() == 0:
        # root reads anything: run devlint as an unprivileged user (nobody) instead, in a
        # directory that user can reach
        if not _can_drop_privileges():
            pytest.skip("running as root and cannot drop privileges to test an unreadable file")
        tmp_path = Path(tempfile.mkdtemp(prefix="devlint-unreadable-", dir="/tmp"))
        tmp_path.chmod(0o755)

        def demote():
            os.setgid(65534)
            os.setuid(65534)
        kw = {"preexec_fn": demote}
    else:
        kw = {}
    try:
        bad = tmp_path / "secret.py"
        bad.write_bytes(GOOD)
        bad.chmod(0)
        (tmp_path / "good.py").write_bytes(GOOD)
        (tmp_path / "good.py").chmod(0o644)
        try:
            proc = run_cli("secret.py", "good.py", cwd=tmp_path, **kw)
        except PermissionError as exc:
            pytest.skip(f"running as root, and the unprivileged user cannot run devlint here: {exc}")
        if "good.py" in proc.stderr or (kw and proc.returncode not in (0, 1, 2)):
            pytest.skip(f"the unprivileged user cannot use this environment: {proc.stderr[-300:]}")
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr == "devlint: error: secret.py: cannot read: Permission denied\n"
        assert GOOD_LINE.search(proc.stdout)
    finally:
        if kw:
            shutil.rmtree(tmp_path, ignore_errors=True)


def test_paths_that_are_not_files(tmp_path):
    (tmp_path / "good.py").write_bytes(GOOD)
    (tmp_path / "pkg.py").mkdir()  # a directory passed where a file is expected: walked
    (tmp_path / "pkg.py" / "inner.py").write_bytes(GOOD)
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "broken.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "self.py").symlink_to(tmp_path / "self.py")
    # DL002's expectations, as in _lint (by default DL007 stands for both on `torch.ones(2).cuda()`)
    proc = run_cli("--select", "DL001,DL002", "missing.py", "good.py/x", "fifo.py", "broken.py", "self.py",
                   "pkg.py", "good.py", cwd=tmp_path, timeout=60)
    no_traceback(proc)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "devlint: error: missing.py: no such file or directory",
        "devlint: error: good.py/x: not a directory (a file used as a directory in the path)",
        "devlint: error: fifo.py: not a regular file or directory (a device, FIFO or socket)",
        "devlint: error: broken.py: broken symlink",
        "devlint: error: self.py: symlink loop",
    ]
    assert GOOD_LINE.search(proc.stdout)
    assert re.search(r"^pkg\.py/inner\.py:2:5: \[\*\] DL002 ", proc.stdout, re.M)


def test_symlinks_in_a_walked_tree(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "theirs.py").write_bytes(GOOD)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "good.py").write_bytes(GOOD)
    (tree / "sub" / "mine.py").write_bytes(GOOD)
    (tree / "sub" / "loop").symlink_to(tree)  # a directory cycle
    (tree / "ext").symlink_to(outside)  # a directory out of the tree
    (tree / "ext_file.py").symlink_to(outside / "theirs.py")  # a file out of the tree
    (tree / "alias.py").symlink_to(tree / "sub" / "mine.py")  # inside: linted once
    (tree / "dangling.py").symlink_to(tree / "gone.py")
    (tree / "ring").symlink_to(tree / "ring")
    proc = run_cli("--fix", "--select", "DL001,DL002", ".", cwd=tree, timeout=60)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # warnings do not fail the run
    assert sorted(proc.stderr.splitlines()) == sorted([
        "devlint: warning: ./dangling.py: broken symlink; skipped",
        f"devlint: warning: ./ext: symlink out of the tree (to {outside.resolve()}); skipped",
        f"devlint: warning: ./ext_file.py: symlink out of the tree (to {(outside / 'theirs.py').resolve()}); skipped",
        "devlint: warning: ./ring: symlink loop; skipped",
        "devlint: warning: ./sub/loop: symlink loop (directory already visited through another path); skipped",
    ])
    assert (outside / "theirs.py").read_bytes() == GOOD, "--fix wrote outside the tree"
    assert FIXED_LINE in (tree / "good.py").read_bytes()
    assert FIXED_LINE in (tree / "sub" / "mine.py").read_bytes()
    assert (tree / "alias.py").is_symlink(), "the fix replaced a symlink by a file"


def test_fix_through_explicit_symlink_keeps_the_link(tmp_path):
    (tmp_path / "real.py").write_bytes(GOOD)
    (tmp_path / "link.py").symlink_to("real.py")
    proc = run_cli("--fix", "--select", "DL001,DL002", "link.py", cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 0
    assert (tmp_path / "link.py").is_symlink() and os.readlink(tmp_path / "link.py") == "real.py"
    assert FIXED_LINE in (tmp_path / "real.py").read_bytes()


def test_hard_linked_file_is_not_split(tmp_path):
    (tmp_path / "a.py").write_bytes(GOOD)
    os.link(tmp_path / "a.py", tmp_path / "b.py")
    proc = run_cli("--fix", "--select", "DL001,DL002", "a.py", cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2
    assert proc.stderr == ("devlint: error: a.py: cannot write: the file has 2 hard links and a rewrite "
                           "would split them; not overwritten\n")
    assert (tmp_path / "a.py").read_bytes() == GOOD
    assert os.stat(tmp_path / "a.py").st_ino == os.stat(tmp_path / "b.py").st_ino



def test_unreadable_file_simulated_in_process(tmp_path, monkeypatch):
    """Root reads any file, so the read failure is simulated; the CLI code path is real."""
    from click.testing import CliRunner

    from devlint import cli, runner

    (tmp_path / "secret.py").write_bytes(GOOD)
    (tmp_path / "good.py").write_bytes(GOOD)
    real = runner.read_bytes

    def read_bytes(path):
        if os.path.basename(path) == "secret.py":
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(runner, "read_bytes", read_bytes)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli.main, ["--fix", "--select", "DL001,DL002", "secret.py", "good.py"])
    assert res.exit_code == 2
    assert "devlint: error: secret.py: cannot read: Permission denied" in res.output
    assert (tmp_path / "secret.py").read_bytes() == GOOD
    assert FIXED_LINE in (tmp_path / "good.py").read_bytes()
