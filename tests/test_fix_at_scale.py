"""Fix safety at scale: `devlint --fix --unsafe-fixes --select ALL` over a copy of the
installed torch package's Python sources (~2,300 files nobody here wrote).

Every fixed file must still compile, a second run must change nothing, no fix may add an
undefined name (pyflakes, before vs after, per changed file) and no fixable finding of a
rule that fixed something may remain. Works with whatever rules exist (--select ALL).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from clihelp import devlint_cmd

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
pyflakes_api = pytest.importorskip("pyflakes.api", reason="pyflakes is needed to compare undefined names")
from pyflakes import messages as pyflakes_messages  # noqa: E402
from pyflakes import reporter as pyflakes_reporter  # noqa: E402

from devlint import registry  # noqa: E402
from devlint.engine import Settings, applicable, lint_source  # noqa: E402


def _copy_sources(dst: Path) -> list[Path]:
    src = Path(torch.__file__).parent
    files = []
    for p in sorted(src.rglob("*.py")):
        rel = p.relative_to(src)
        if any(part in ("__pycache__",) for part in rel.parts):
            continue
        out = dst / "torch" / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, out)
        files.append(out)
    return files


def _chunks(files: list[Path], n: int) -> list[list[Path]]:
    """Balance by size: the biggest files first, each to the lightest chunk."""
    chunks: list[list[Path]] = [[] for _ in range(n)]
    load = [0] * n
    for f in sorted(files, key=lambda p: -p.stat().st_size):
        i = load.index(min(load))
        chunks[i].append(f)
        load[i] += f.stat().st_size
    return [c for c in chunks if c]


TIMEOUT = int(os.environ.get("DEVLINT_SCALE_TIMEOUT", "3000"))


def _one(chunk: list[Path], cwd: Path) -> subprocess.CompletedProcess:
    args = ["--fix", "--unsafe-fixes", "--select", "ALL", "--output-format", "json"]
    try:
        return subprocess.run([*devlint_cmd(), *args, *map(str, chunk)], cwd=cwd,
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"devlint --fix over {len(chunk)} files took more than {TIMEOUT} s", pytrace=False)


def _run(files: list[Path], cwd: Path) -> list[subprocess.CompletedProcess]:
    n = max(2, min(4, os.cpu_count() or 2))
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda chunk: _one(chunk, cwd), _chunks(files, n)))


def _check_clean_run(procs) -> list[dict]:
    findings = []
    for p in procs:
        assert p.returncode in (0, 1, 2), p.stderr[-3000:]
        assert "Traceback" not in p.stderr, p.stderr[-3000:]
        bad = [ln for ln in p.stderr.splitlines()
               if "internal error" in ln or "a fix produced" in ln or "did not converge" in ln]
        assert not bad, "\n".join(bad[:20])
        findings.extend(json.loads(p.stdout))
    return findings


class _Collect(pyflakes_reporter.Reporter):
    def __init__(self):
        self.messages = []

    def flake(self, message):
        self.messages.append(message)

    def unexpectedError(self, filename, msg):  # noqa: N802 - pyflakes API
        pass

    def syntaxError(self, filename, msg, lineno, offset, text):  # noqa: N802
        self.messages.append(("syntax", msg))


def _undefined_names(source: bytes, filename: str) -> collections.Counter:
    rep = _Collect()
    pyflakes_api.check(source.decode("utf-8", "replace"), filename, rep)
    names = collections.Counter()
    for m in rep.messages:
        if isinstance(m, pyflakes_messages.UndefinedName):
            names[m.message_args[0]] += 1
        elif isinstance(m, tuple):
            names["<syntax error>"] += 1
    return names


def test_fix_all_rules_over_torch_sources(tmp_path):
    files = _copy_sources(tmp_path)
    assert len(files) > 1000
    every = int(os.environ.get("DEVLINT_SCALE_EVERY", "1"))  # e.g. 10: a deterministic tenth, for a quick look
    files = files[::every]
    before = {f: f.read_bytes() for f in files}

    _check_clean_run(_run(files, tmp_path))
    changed = [f for f in files if f.read_bytes() != before[f]]
    print(f"\n{len(files)} files, {len(changed)} changed by --fix")

    settings = Settings(select=registry.resolve(["ALL"]), unsafe_fixes=True)
    problems = []
    for f in changed:
        old, new = before[f], f.read_bytes()
        try:
            compile(new, str(f), "exec", dont_inherit=True)
        except SyntaxError as exc:
            problems.append(f"{f}: no longer compiles: {exc}")
            continue
        added = _undefined_names(new, str(f)) - _undefined_names(old, str(f))
        if added:
            problems.append(f"{f}: fix introduced undefined names {sorted(added)}")
        fixed_codes = {d.code for d in lint_source(old, str(f), settings).diagnostics
                       if applicable(d.fix, settings)}
        left = [d for d in lint_source(new, str(f), settings).diagnostics
                if d.code in fixed_codes and applicable(d.fix, settings)]
        if left:
            problems.append(f"{f}: fixable findings remain after --fix: "
                            + "; ".join(f"{d.line}: {d.code} {d.message}" for d in left[:3]))
    assert not problems, "\n".join(problems[:30])

    if changed:  # idempotence: a second --fix changes nothing
        after = {f: f.read_bytes() for f in changed}
        _check_clean_run(_run(changed, tmp_path))
        again = [str(f) for f in changed if f.read_bytes() != after[f]]
        assert not again, f"a second --fix changed {len(again)} files: {again[:10]}"
    # files that were not changed are byte-identical (nothing else was touched)
    leftovers = [p for p in tmp_path.rglob(".devlint-*")]
    assert not leftovers, leftovers[:5]
