"""rules/ ships inside the wheel as devlint.rules and never as a top-level `rules` package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_contains_rules_as_devlint_rules(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "-q", "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("devlint-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    rule_files = sorted(Path(n).name for n in names if n.startswith("devlint/rules/"))
    expected = sorted(p.name for p in (ROOT / "rules").glob("*.py"))
    assert rule_files == expected
    assert not any(n.startswith("rules/") for n in names), "a top-level `rules` package was installed"
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "devlint = devlint.cli:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()


def test_installed_rules_resolve_to_the_repository_rules_directory():
    import devlint.rules

    assert Path(devlint.rules.__file__).resolve().parent == (ROOT / "rules").resolve()
