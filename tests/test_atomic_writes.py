"""Atomic writes: a fixed file is written to a temporary file in its own directory and
renamed over the original (permissions kept); a run killed mid-way leaves every file
either original or fully fixed, with no stray temporary files; a file edited on disk
between read and write is not overwritten."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from clihelp import devlint_cmd, no_traceback, run_cli
from devlint import engine, registry, runner
from devlint.engine import Settings, fix_source

BUG = "import torch\nx{i} = torch.ones({i}).cuda()\ny{i} = torch.zeros(2).cuda()  # keep {i}\n"
SETTINGS = Settings(select=registry.resolve(["DL002"]))


def _tree(root, n):
    files = {}
    for i in range(n):
        p = root / f"m{i:04d}.py"
        p.write_text(BUG.format(i=i))
        files[p] = p.read_bytes()
    return files


def test_fix_keeps_permissions_and_leaves_no_temp_files(tmp_path):
    p = tmp_path / "script.py"
    p.write_text(BUG.format(i=1))
    p.chmod(0o751)
    proc = run_cli("--fix", "--select", "DL002", "script.py", cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 0
    assert b".to(device)" in p.read_bytes()
    assert oct(p.stat().st_mode & 0o7777) == oct(0o751)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["script.py"]


def test_temp_file_is_in_the_same_directory_and_renamed(tmp_path, monkeypatch):
    p = tmp_path / "a.py"
    p.write_bytes(b"old")
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append((os.path.dirname(src), os.path.basename(src), dst, open(src, "rb").read()))
        return real_replace(src, dst)

    monkeypatch.setattr(runner.os, "replace", spy)
    runner.atomic_write(str(p), b"new", b"old")
    assert p.read_bytes() == b"new"
    (d, name, dst, data), = seen
    assert d == str(tmp_path) and name.startswith(".devlint-") and name.endswith(".tmp")
    assert dst == str(p) and data == b"new"


def test_file_changed_between_read_and_write_is_not_overwritten(tmp_path, monkeypatch):
    p = tmp_path / "edited.py"
    p.write_text(BUG.format(i=3))
    real_fix = engine.fix_source

    def fix_while_user_edits(source, filename, settings):
        out = real_fix(source, filename, settings)
        p.write_text("# the user's edit, saved while devlint was fixing\n" + BUG.format(i=3))
        return out

    monkeypatch.setattr(engine, "fix_source", fix_while_user_edits)
    res = runner.process_file(str(p), "edited.py", SETTINGS, fix=True)
    assert res.error == "cannot write: file changed on disk while devlint was fixing it; not overwritten"
    assert p.read_text().startswith("# the user's edit")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["edited.py"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_leaves_files_original_or_fully_fixed(tmp_path, sig):
    files = _tree(tmp_path, 150)
    fixed = {p: fix_source(b, p.name, SETTINGS).source for p, b in files.items()}
    assert all(fixed[p] != files[p] for p in files)
    proc = subprocess.Popen([*devlint_cmd(), "--fix", "--select", "DL002", "."], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until the run is mid-way
        done = sum(p.read_bytes() == fixed[p] for p in list(files)[:40])
        if done >= 3 or proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err[-3000:]
    states = {"original": 0, "fixed": 0}
    for p in files:
        data = p.read_bytes()
        assert data in (files[p], fixed[p]), f"{p.name} is neither original nor fully fixed"
        states["original" if data == files[p] else "fixed"] += 1
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted(p.name for p in files), "stray files"
    if proc.returncode != 0 or states["original"]:
        assert proc.returncode == 2
        assert err.strip().splitlines()[-1].startswith(f"devlint: error: interrupted ({sig.name})")
    assert states["fixed"] >= 1


def _assert_no_process_left_in(directory, wait: float = 10.0) -> None:
    """No worker of a killed devlint lives on (it would keep writing files and hold the
    caller's pipes open): checked through /proc where there is one."""
    if not os.path.isdir("/proc/self/cwd"):
        return
    target = os.path.realpath(directory)
    deadline = time.time() + wait
    while True:
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.path.realpath(f"/proc/{pid}/cwd") == target:
                    left.append(pid)
            except OSError:
                continue
        if not left or time.time() > deadline:
            break
        time.sleep(0.2)
    assert not left, f"processes still running in {target}: {left}"


def test_killed_run_never_leaves_half_written_files(tmp_path):
    """SIGKILL cannot be caught: files are still original or fully fixed (the rename is
    atomic) and a leftover temporary file is never linted by the next run."""
    files = _tree(tmp_path, 120)
    fixed = {p: fix_source(b, p.name, SETTINGS).source for p, b in files.items()}
    proc = subprocess.Popen([*devlint_cmd(), "--fix", "--select", "DL002", "."], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if sum(p.read_bytes() == fixed[p] for p in list(files)[:30]) >= 2:
            break
        time.sleep(0.01)
    proc.kill()
    proc.wait(timeout=60)
    _assert_no_process_left_in(tmp_path)
    for p in files:
        assert p.read_bytes() in (files[p], fixed[p]), p.name
    (tmp_path / ".devlint-leftover.tmp").write_text(BUG.format(i=9))  # as a kill could leave
    proc = run_cli("--fix", "--select", "DL002", ".", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ".devlint-leftover" not in proc.stdout + proc.stderr
    assert all(p.read_bytes() == fixed[p] for p in files)
