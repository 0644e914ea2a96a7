"""The pre-commit hook, driven by the real `pre-commit` on temporary git repositories.

The hook repository is a committed snapshot of this working tree. `pre-commit try-repo`
always builds a fresh environment in a temporary store (pip-installing devlint with
libcst/click, no torch; about a minute), so only the first test uses it; the
others name the snapshot in a `.pre-commit-config.yaml` and share one environment
built in a private PRE_COMMIT_HOME.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
GPU = "import torch\n\nx = torch.ones(2).cuda()\nprint(x)\n"
CLEAN = "import torch\n\nx = torch.ones(2)\nprint(x)\n"


def _have_precommit() -> bool:
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        return False
    return True


if shutil.which("git") is None:
    pytest.skip("git is not installed", allow_module_level=True)
if not _have_precommit():
    pytest.skip("pre-commit is not installed (pip install pre-commit)", allow_module_level=True)


def _env(home: Path) -> dict:
    env = dict(os.environ)
    env.update({
        "PRE_COMMIT_HOME": str(home),
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
        "PRE_COMMIT_COLOR": "never", "NO_COLOR": "1",
    })
    # pre-commit itself runs from this interpreter; hooks run in the env it builds
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.pop("VIRTUAL_ENV", None)
    return env


def _git(cwd: Path, *args: str, env: dict) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory):
    """(path, sha, env): a committed copy of this working tree, and the pre-commit env."""
    home = tmp_path_factory.mktemp("pre-commit-home")
    env = _env(home)
    snap = tmp_path_factory.mktemp("devlint-hook-repo")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split("\n")
    for f in filter(None, files):
        src = REPO / f
        if src.is_file():
            (snap / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, snap / f)
    _git(snap, "init", "-q", env=env)
    _git(snap, "add", "-A", env=env)
    _git(snap, "commit", "-qm", "snapshot", env=env)
    return snap, _git(snap, "rev-parse", "HEAD", env=env), env


@pytest.fixture
def project(tmp_path, hook_repo):
    snap, sha, env = hook_repo
    proj = tmp_path / "proj"
    proj.mkdir()
    _git(proj, "init", "-q", env=env)
    (proj / "pyproject.toml").write_text('[tool.devlint]\nextend-exclude = ["legacy/"]\n')
    _git(proj, "add", "pyproject.toml", env=env)
    _git(proj, "commit", "-qm", "init", env=env)
    return proj


def _precommit(proj: Path, env: dict, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=proj, env=env, text=True,
                          capture_output=True, timeout=timeout)


def _try_repo(proj: Path, hook_repo, *args: str) -> subprocess.CompletedProcess:
    snap, sha, env = hook_repo
    return _precommit(proj, env, "try-repo", str(snap), "devlint", "--ref", sha, "--verbose", *args)


def _run_hook(proj: Path, hook_repo, *args: str, hook_args=()) -> subprocess.CompletedProcess:
    """`pre-commit run` with a config naming the snapshot repo: unlike try-repo (a fresh
    store and environment per call) this reuses the session's environment."""
    _write_config(proj, hook_repo, hook_args)
    _git(proj, "add", ".pre-commit-config.yaml", env=hook_repo[2])  # pre-commit refuses an unstaged config
    return _precommit(proj, hook_repo[2], "run", "--verbose", *args)


def _write_config(proj: Path, hook_repo, args=()) -> None:
    snap, sha, env = hook_repo
    extra = f"\n        args: [{', '.join(args)}]" if args else ""
    (proj / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {snap}\n    rev: {sha}\n    hooks:\n      - id: devlint{extra}\n")


def _stage(proj: Path, env: dict, files: dict) -> None:
    for name, text in files.items():
        p = proj / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    _git(proj, "add", *files, env=env)


def test_try_repo_blocks_gpu_only_file_and_passes_clean_one(project, hook_repo):
    env = hook_repo[2]
    _stage(project, env, {"train.py": GPU})
    res = _try_repo(project, hook_repo)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "train.py:3:5" in out and "DL002" in out and "Failed" in out
    _git(project, "rm", "-q", "--cached", "train.py", env=env)
    _stage(project, env, {"clean.py": CLEAN})
    res = _try_repo(project, hook_repo)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Passed" in res.stdout


def test_hook_env_has_no_torch(project, hook_repo):
    snap, sha, env = hook_repo
    _stage(project, env, {"clean.py": CLEAN})
    assert _run_hook(project, hook_repo).returncode == 0
    pythons = glob.glob(os.path.join(env["PRE_COMMIT_HOME"], "repo*", "py_env-*", "bin", "python"))
    assert pythons, "pre-commit built no python environment"
    probe = subprocess.run([pythons[0], "-c", "import devlint, libcst, click\nimport torch"],
                           capture_output=True, text=True)
    assert "No module named 'torch'" in probe.stderr, probe.stderr


def test_commit_is_blocked_then_fix_rewrites_and_hook_fails_for_modified_files(project, hook_repo):
    env = hook_repo[2]
    _write_config(project, hook_repo)
    _precommit(project, env, "install")
    _stage(project, env, {"train.py": GPU, ".pre-commit-config.yaml":
                          (project / ".pre-commit-config.yaml").read_text()})
    commit = subprocess.run(["git", "commit", "-m", "add training"], cwd=project, env=env, text=True,
                            capture_output=True)
    assert commit.returncode != 0, commit.stdout + commit.stderr
    assert "DL002" in commit.stdout + commit.stderr
    assert _git(project, "log", "--oneline", env=env).count("\n") == 0  # still only "init"

    res = _run_hook(project, hook_repo, hook_args=["--fix"])
    assert res.returncode == 1, res.stdout + res.stderr
    assert "files were modified by this hook" in res.stdout
    fixed = (project / "train.py").read_text()
    assert "x = torch.ones(2, device=device)" in fixed and ".cuda()" not in fixed
    _git(project, "add", "train.py", env=env)
    commit = subprocess.run(["git", "commit", "-m", "add training"], cwd=project, env=env, text=True,
                            capture_output=True)
    assert commit.returncode == 0, commit.stdout + commit.stderr


def test_commit_without_python_files_skips_the_hook(project, hook_repo):
    env = hook_repo[2]
    _stage(project, env, {"README.md": "model.cuda()\n", "notes.txt": "x.cuda()\n"})
    res = _run_hook(project, hook_repo)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "no files to check" in res.stdout and "Skipped" in res.stdout


def test_staged_file_excluded_by_config_passes(project, hook_repo):
    env = hook_repo[2]
    _stage(project, env, {"legacy/old_gpu.py": GPU, "ok.py": CLEAN})
    res = _run_hook(project, hook_repo)
    assert res.returncode == 0, res.stdout + res.stderr
    _stage(project, env, {"new_gpu.py": GPU})
    res = _run_hook(project, hook_repo)
    assert res.returncode == 1
    assert "new_gpu.py" in res.stdout and "old_gpu.py" not in res.stdout


def test_long_file_list_split_into_batches(project, hook_repo):
    env = hook_repo[2]
    # ~800 paths of ~190 characters exceed pre-commit's 128 KiB command line: >= 2 batches
    deep = "/".join(["d" * 40] * 3)
    files = {f"{deep}/module_{i:04d}_{'x' * 40}.py": "value = 1\n" for i in range(800)}
    files[f"{deep}/zz_last_gpu_{'x' * 40}.py"] = GPU  # sorts last: in the final batch
    _stage(project, env, files)
    res = _run_hook(project, hook_repo)
    out = res.stdout
    assert res.returncode == 1, out + res.stderr
    assert "zz_last_gpu_" in out and "DL002" in out
    assert "All checks passed." in out, "expected a clean batch before the failing one"
    assert out.count("Found 1 finding (") == 1  # DL007 (also DL002): one finding for the one GPU line
