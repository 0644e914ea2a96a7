"""Discovery and running of the before/after fixture programs (shared by the tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
RUNNER = HERE / "fixture_runner.py"


@dataclass
class Case:
    code: str
    name: str
    path: Path
    lines: list[int]
    select: list[str]
    unsafe: bool = False
    before: str = "same"  # "same": runs on CPU and prints what after.py prints; "crash": fails on CPU
    crash: str = ""  # regex the crash's stderr must match
    cuda_names: list[str] = field(default_factory=list)  # globals that must be on cuda in after.py
    trap: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.code}/{self.name}"

    @property
    def before_path(self) -> Path:
        return self.path / "before.py"

    @property
    def after_path(self) -> Path:
        p = self.path / "after.py"
        return p if p.exists() else self.before_path


def discover_cases(code: str | None = None) -> list[Case]:
    cases = []
    for meta in sorted(FIXTURES.glob("DL*/*/case.toml")):
        d = meta.parent
        c = d.parent.name
        if code is not None and c != code:
            continue
        data = tomllib.loads(meta.read_text())
        known = {"lines", "select", "unsafe", "before", "crash", "cuda_names"}
        cases.append(Case(
            code=c, name=d.name, path=d,
            lines=list(data.get("lines", [])),
            select=list(data.get("select", [c])),
            unsafe=bool(data.get("unsafe", False)),
            before=data.get("before", "same"),
            crash=data.get("crash", ""),
            cuda_names=list(data.get("cuda_names", [])),
            trap=not (d / "after.py").exists(),
            extra={k: v for k, v in data.items() if k not in known},
        ))
    return cases


_RUNS: dict = {}
# Set by conftest.py on the controlling process: a folder shared by all xdist workers, so a
# program is run once per test session, not once per worker.
MEMO_ENV = "DEVLINT_TEST_RUN_MEMO"


def run_program(path: Path, *, cuda: bool = False, names=(), timeout: int = 120, extra_env=None):
    """Run a fixture program in a subprocess; CUDA hidden unless ``cuda``. Returns
    (CompletedProcess, devices dict or None). Fixture programs are deterministic, so a
    plain run (no names, no extra environment) is done once per session and shared by
    the harness, the simulated-CUDA comparison and the transfer counts (across xdist
    workers too, through the folder named by ``$DEVLINT_TEST_RUN_MEMO``)."""
    key = (str(path), cuda)
    if names or extra_env:
        return _run_program(path, cuda=cuda, names=names, timeout=timeout, extra_env=extra_env)
    if key not in _RUNS:
        _RUNS[key] = _shared_run(path, cuda, timeout)
    return _RUNS[key]


def _shared_run(path: Path, cuda: bool, timeout: int):
    memo = os.environ.get(MEMO_ENV)
    if not memo or not os.path.isdir(memo):
        return _run_program(path, cuda=cuda, timeout=timeout)
    import fcntl
    import hashlib

    digest = hashlib.sha256(f"{path.resolve()}|{cuda}|".encode() + path.read_bytes()).hexdigest()[:24]
    entry = Path(memo) / f"{digest}.json"
    with open(Path(memo) / f"{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second worker waits for the first one's run
        if entry.exists():
            d = json.loads(entry.read_text())
            return subprocess.CompletedProcess(d["args"], d["returncode"], d["stdout"], d["stderr"]), None
        proc, devices = _run_program(path, cuda=cuda, timeout=timeout)
        tmp = entry.with_suffix(".tmp")
        tmp.write_text(json.dumps({"args": proc.args, "returncode": proc.returncode,
                                   "stdout": proc.stdout, "stderr": proc.stderr}))
        os.replace(tmp, entry)
        return proc, devices


def _run_program(path: Path, *, cuda: bool = False, names=(), timeout: int = 120, extra_env=None):
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"
    env.setdefault("OMP_NUM_THREADS", "1")
    if not cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra_env or {})
    devices_file = None
    cmd = [sys.executable, str(RUNNER), str(path)]
    if names:
        devices_file = path.parent / f".devices-{os.getpid()}.json"
        cmd += ["--devices", str(devices_file), "--names", ",".join(names)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=path.parent)
    devices = None
    if devices_file is not None and devices_file.exists():
        devices = json.loads(devices_file.read_text())
        devices_file.unlink()
    return proc, devices
