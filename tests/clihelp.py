"""Running the real `devlint` command in a subprocess (shared by the safety tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def devlint_cmd() -> list[str]:
    """The installed console script next to this interpreter (it does not put the
    working directory on sys.path, unlike `python -m devlint`)."""
    script = Path(sys.executable).with_name("devlint")
    if script.exists():
        return [str(script)]
    found = shutil.which("devlint")
    return [found] if found else [sys.executable, "-m", "devlint"]


def run_cli(*args, cwd=None, env=None, timeout=300, **kw) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.pop("DEVLINT_DEBUG", None)
    e.update(env or {})
    return subprocess.run([*devlint_cmd(), *map(str, args)], cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=timeout, **kw)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr[-3000:]
