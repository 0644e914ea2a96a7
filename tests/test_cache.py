"""The lint-result cache: warm runs parse nothing, results never go stale, a broken
cache heals itself, concurrent runs are safe, and --fix still fixes."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from devlint import cache as cache_mod
from devlint import engine, registry
from devlint.cache import Cache
from devlint.cli import main
from devlint.engine import Settings
from devlint.runner import run_files

BAD = "import torch\nx = torch.ones(2).cuda()\ny = torch.zeros(3, device='cuda')\n"
GOOD = "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n" \
       "x = torch.ones(2).to(device)\n"
PLAIN = "print('no torch here')\n"
BROKEN = "import torch\nx = torch.ones(2).cuda(\n"


@pytest.fixture
def project(tmp_path):
    d = tmp_path / "proj"
    d.mkdir()
    (d / "bad.py").write_text(BAD)
    (d / "good.py").write_text(GOOD)
    (d / "plain.py").write_text(PLAIN)
    (d / "broken.py").write_text(BROKEN)
    for i in range(6):
        (d / f"more_{i}.py").write_text(BAD + f"z{i} = x.cuda()\n")
    return d


@pytest.fixture
def parses(monkeypatch):
    """Counts LibCST parses done by the engine."""
    calls = []
    real = engine.parse

    def counting(source):
        calls.append(source)
        return real(source)

    monkeypatch.setattr(engine, "parse", counting)
    return calls


def _files(d: Path):
    return [(str(p), str(p)) for p in sorted(d.glob("*.py"))]


def _dicts(outcomes):
    return [(o.path, o.error, [d.to_dict() for d in o.diagnostics]) for o in outcomes]


SETTINGS = Settings(select=registry.resolve(["DL001", "DL002"]))  # fixed, so new rules cannot shift these expectations


def test_warm_run_parses_nothing_and_reports_the_same(project, tmp_path, parses):
    c = Cache(str(tmp_path / "cache"), SETTINGS.key())
    cold = run_files(_files(project), SETTINGS, jobs=1, cache=c)
    assert len(parses) == 9  # every file but plain.py, which no rule's prefilter matches
    parses.clear()
    c2 = Cache(str(tmp_path / "cache"), SETTINGS.key())
    warm = run_files(_files(project), SETTINGS, jobs=1, cache=c2)
    assert parses == []
    assert c2.hits == 9 and c2.misses == 0
    assert _dicts(warm) == _dicts(cold)
    assert any(d["code"] == "DL000" for _, _, ds in _dicts(warm) for d in ds)  # parse errors cached too
    # and the same as no cache at all
    assert _dicts(run_files(_files(project), SETTINGS, jobs=1)) == _dicts(cold)


def test_changed_file_or_settings_miss(project, tmp_path, parses):
    root = str(tmp_path / "cache")
    run_files(_files(project), SETTINGS, jobs=1, cache=Cache(root, SETTINGS.key()))
    (project / "good.py").write_text(GOOD + "w = torch.ones(1).cuda()\n")
    parses.clear()
    out = run_files(_files(project), SETTINGS, jobs=1, cache=Cache(root, SETTINGS.key()))
    assert len(parses) == 1
    good = next(o for o in out if o.path.endswith("good.py"))
    assert [d.line for d in good.diagnostics] == [4]
    # other settings: nothing is served from the first settings' entries
    other = Settings(select=registry.resolve(["DL001"]))
    parses.clear()
    c = Cache(root, other.key())
    run_files(_files(project), other, jobs=1, cache=c)
    assert c.hits == 0


def test_same_content_under_another_name_is_not_confused(tmp_path):
    d = tmp_path / "p"
    d.mkdir()
    (d / "a.py").write_text(BAD)
    (d / "b.py").write_text(BAD)
    c = Cache(str(tmp_path / "cache"), SETTINGS.key())
    run_files(_files(d), SETTINGS, jobs=1, cache=c)
    out = run_files(_files(d), SETTINGS, jobs=1, cache=Cache(str(tmp_path / "cache"), SETTINGS.key()))
    assert [dg.filename for o in out for dg in o.diagnostics] == [str(d / "a.py")] * 2 + [str(d / "b.py")] * 2


def test_corrupt_entries_heal(project, tmp_path, parses):
    root = tmp_path / "cache"
    cold = run_files(_files(project), SETTINGS, jobs=1, cache=Cache(str(root), SETTINGS.key()))
    entries = sorted(p for p in root.rglob("*.json"))
    assert len(entries) == 9
    garbage = [b"", b"{not json", b"\xff\xfe", b"[]", b'{"format": 1, "diagnostics": [{"code": 1}]}',
               json.dumps({"format": 999, "diagnostics": []}).encode()]
    for i, p in enumerate(entries):
        p.write_bytes(garbage[i % len(garbage)])
    parses.clear()
    healed = run_files(_files(project), SETTINGS, jobs=1, cache=Cache(str(root), SETTINGS.key()))
    assert _dicts(healed) == _dicts(cold)
    assert len(parses) == 9
    # rewritten: the next run is warm again
    parses.clear()
    run_files(_files(project), SETTINGS, jobs=1, cache=Cache(str(root), SETTINGS.key()))
    assert parses == []


def test_concurrent_runs_share_a_cache_safely(project, tmp_path):
    root = str(tmp_path / "cache")
    expected = _dicts(run_files(_files(project), SETTINGS, jobs=1))
    results, errors = [], []

    def one():
        try:
            results.append(_dicts(run_files(_files(project), SETTINGS, jobs=1, cache=Cache(root, SETTINGS.key()))))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(r == expected for r in results)
    leftovers = [p for p in Path(root).rglob("*") if p.name.startswith(".tmp-")]
    assert leftovers == []
    for p in Path(root).rglob("*.json"):
        cache_mod.load(p.read_bytes(), "x.py")  # every entry whole


def test_unwritable_cache_dir_just_means_no_cache(project, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = run_files(_files(project), SETTINGS, jobs=1, cache=Cache(str(blocker / "cache"), SETTINGS.key()))
    assert _dicts(out) == _dicts(run_files(_files(project), SETTINGS, jobs=1))


def _cli(args, cwd):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args)
    finally:
        os.chdir(old)


def test_cli_caches_by_default_and_no_cache_writes_nothing(project, tmp_path, monkeypatch):
    monkeypatch.delenv(cache_mod.ENV_DIR, raising=False)
    r = _cli(["check", "--no-cache", "."], project)
    assert r.exit_code == 1
    assert not (project / ".devlint_cache").exists()
    r1 = _cli(["check", "."], project)
    assert (project / ".devlint_cache" / "CACHEDIR.TAG").exists()
    assert (project / ".devlint_cache" / ".gitignore").read_text().strip().endswith("*")
    r2 = _cli(["check", "."], project)
    assert r1.exit_code == r2.exit_code == 1 and r1.output == r2.output == r.output
    custom = tmp_path / "elsewhere"
    _cli(["check", "--cache-dir", str(custom), "."], project)
    assert list(custom.rglob("*.json"))


def test_fix_still_fixes_with_a_warm_cache(project, tmp_path, parses):
    cdir = str(tmp_path / "cache")
    r = _cli(["check", "--select", "DL001,DL002", "--cache-dir", cdir, "--jobs", "1", "."], project)
    assert r.exit_code == 1
    parses.clear()
    r = _cli(["check", "--select", "DL001,DL002", "--cache-dir", cdir, "--jobs", "1", "--fix", "."], project)
    fixed = (project / "bad.py").read_text()
    assert ".cuda()" not in fixed and "device=device" in fixed
    # a file with a cached clean result was skipped; files with fixes were fixed
    assert GOOD.encode() not in parses
    assert BAD.encode() in parses
    r = _cli(["check", "--select", "DL001,DL002", "--cache-dir", cdir, "--jobs", "1", "."], project)
    assert "bad.py" not in r.output


def test_clean_removes_only_a_devlint_cache(project, tmp_path):
    cdir = tmp_path / "cache"
    _cli(["check", "--cache-dir", str(cdir), "."], project)
    assert cdir.exists()
    r = _cli(["clean", "--cache-dir", str(cdir)], project)
    assert r.exit_code == 0 and not cdir.exists()
    r = _cli(["clean", "--cache-dir", str(cdir)], project)
    assert r.exit_code == 0 and "No cache" in r.output
    # never removes a directory devlint did not create
    r = _cli(["clean", "--cache-dir", str(project)], project)
    assert r.exit_code == 2 and (project / "bad.py").exists()
