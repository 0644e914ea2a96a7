"""Configuration through the real CLI: `[tool.devlint]` / `devlint.toml`, found by walking up
from the first path; CLI flags beat config; excludes, .gitignore, per-file ignores."""

from __future__ import annotations

import subprocess
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from devlint.cli import main

GPU = "import torch\n\nx = torch.ones(2).cuda()\n"
# DL001 (statement discards a conversion) and DL002 on different lines
BOTH = "import torch\n\ny = torch.ones(2)\ny.float()\nz = torch.ones(2).cuda()\n"


def run(args, cwd: Path, monkeypatch):
    monkeypatch.chdir(cwd)
    # these tests exercise DL001/DL002 on `torch.ones(2).cuda()` lines, which DL007
    # (host-alloc-then-move) rightly flags too: keep it out of their expectations
    if args and args[0] in ("rules", "rule", "clean"):
        return CliRunner().invoke(main, args, catch_exceptions=False)
    return CliRunner().invoke(main, [*args, "--ignore", "DL007"], catch_exceptions=False)


def write(root: Path, files: dict) -> None:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)



def findings(output: str) -> list[tuple[str, str]]:
    """(path:line, code) for each text-format finding."""
    out = []
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":") and any(p.startswith("DL") for p in parts[1:3]):
            code = next(p for p in parts[1:3] if p.startswith("DL"))
            out.append((parts[0].rstrip(":").rsplit(":", 2)[0], code))
    return out


def test_pyproject_found_by_walking_up_from_first_path(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": '[project]\nname = "x"\n\n[tool.devlint]\nignore = ["DL002"]\n',
                     "pkg/sub/mod.py": BOTH})
    res = run(["check", "pkg/sub/mod.py"], tmp_path, monkeypatch)
    assert findings(res.output) == [("pkg/sub/mod.py", "DL001")]
    # from a subdirectory, the same config applies
    res = run(["check", "mod.py"], tmp_path / "pkg" / "sub", monkeypatch)
    assert findings(res.output) == [("mod.py", "DL001")]


def test_pyproject_without_section_is_skipped_and_devlint_toml_wins(tmp_path, monkeypatch):
    write(tmp_path, {"devlint.toml": 'select = ["DL002"]\n',
                     "pyproject.toml": '[tool.devlint]\nselect = ["DL001"]\n',
                     "pkg/pyproject.toml": '[project]\nname = "pkg"\n',  # no [tool.devlint]: keep walking
                     "pkg/mod.py": BOTH})
    res = run(["check", "pkg/mod.py"], tmp_path, monkeypatch)
    assert findings(res.output) == [("pkg/mod.py", "DL002")]


def test_cli_flags_override_config(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": '[tool.devlint]\nselect = ["DL001"]\n', "mod.py": BOTH})
    assert findings(run(["check", "mod.py"], tmp_path, monkeypatch).output) == [("mod.py", "DL001")]
    res = run(["check", "--select", "DL002", "mod.py"], tmp_path, monkeypatch)
    assert findings(res.output) == [("mod.py", "DL002")]
    res = run(["check", "--extend-select", "DL002", "mod.py"], tmp_path, monkeypatch)
    assert sorted(c for _, c in findings(res.output)) == ["DL001", "DL002"]
    res = run(["check", "--ignore", "DL001", "mod.py"], tmp_path, monkeypatch)
    assert res.exit_code == 0 and "All checks passed." in res.output


def test_explicit_config_and_isolated(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": '[tool.devlint]\nignore = ["DL002"]\n',
                     "other/strict.toml": 'select = ["DL002"]\n', "mod.py": BOTH})
    res = run(["check", "--config", "other/strict.toml", "mod.py"], tmp_path, monkeypatch)
    assert findings(res.output) == [("mod.py", "DL002")]
    res = run(["check", "--isolated", "mod.py"], tmp_path, monkeypatch)
    assert sorted(c for _, c in findings(res.output)) == ["DL001", "DL002"]


def test_fix_style_and_device_name_from_config(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": '[tool.devlint]\nfix-style = "accelerator"\ndevice-name = "dev"\n',
                     "mod.py": GPU})
    res = run(["check", "--fix", "mod.py"], tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    text = (tmp_path / "mod.py").read_text()
    assert ("dev = torch.accelerator.current_accelerator() if torch.accelerator.is_available() "
            'else torch.device("cpu")') in text
    assert "x = torch.ones(2).to(dev)" in text
    # the CLI beats the config
    write(tmp_path, {"mod.py": GPU})
    run(["check", "--fix", "--fix-style", "cuda", "--device-name", "gpu", "mod.py"], tmp_path, monkeypatch)
    text = (tmp_path / "mod.py").read_text()
    assert 'gpu = torch.device("cuda" if torch.cuda.is_available() else "cpu")' in text


def test_per_file_ignores_silence_and_never_fix(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": '[tool.devlint.per-file-ignores]\n"tests/*.py" = ["DL002"]\n'
                                       '"conftest.py" = ["DL0"]\n',
                     "tests/test_gpu.py": GPU, "conftest.py": BOTH, "src/train.py": GPU,
                     "src/tests/deep.py": GPU})
    res = run(["check", "."], tmp_path, monkeypatch)
    # "tests/*.py" is anchored to the project root; "conftest.py" matches at any depth
    assert sorted(findings(res.output)) == [("src/tests/deep.py", "DL002"), ("src/train.py", "DL002")]
    run(["check", "--fix", "."], tmp_path, monkeypatch)
    assert (tmp_path / "tests/test_gpu.py").read_text() == GPU
    assert (tmp_path / "conftest.py").read_text() == BOTH
    assert ".cuda()" not in (tmp_path / "src/train.py").read_text()


def test_exclude_and_extend_exclude_prune_the_walk(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": '[tool.devlint]\nexclude = ["vendored/"]\nextend-exclude = ["*_old.py"]\n',
                     "vendored/lib.py": GPU, "a_old.py": GPU, "pkg/b_old.py": GPU, "keep.py": GPU})
    res = run(["check"], tmp_path, monkeypatch)
    assert findings(res.output) == [("keep.py", "DL002")]
    # --exclude replaces the config's `exclude`; `extend-exclude` still applies
    res = run(["check", "--exclude", "keep.py"], tmp_path, monkeypatch)
    assert findings(res.output) == [("vendored/lib.py", "DL002")]


def test_explicit_files_are_linted_unless_force_exclude(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": '[tool.devlint]\nextend-exclude = ["legacy/"]\n',
                     "legacy/old.py": GPU, "new.py": GPU})
    res = run(["check", "legacy/old.py", "new.py"], tmp_path, monkeypatch)
    assert sorted(findings(res.output)) == [("legacy/old.py", "DL002"), ("new.py", "DL002")]
    res = run(["check", "--force-exclude", "legacy/old.py", "new.py"], tmp_path, monkeypatch)
    assert findings(res.output) == [("new.py", "DL002")]
    # every explicit path excluded: nothing is linted (never the whole directory)
    res = run(["check", "--force-exclude", "legacy/old.py"], tmp_path, monkeypatch)
    assert res.exit_code == 0 and "All checks passed." in res.output


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_gitignore_is_honoured_inside_a_git_repository(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path, {".gitignore": "generated/\n*.gen.py\n", "generated/model.py": GPU,
                     "pkg/x.gen.py": GPU, "pkg/.gitignore": "!keep.gen.py\n", "pkg/keep.gen.py": GPU,
                     "pkg/real.py": GPU})
    res = run(["check"], tmp_path, monkeypatch)
    assert sorted(findings(res.output)) == [("pkg/keep.gen.py", "DL002"), ("pkg/real.py", "DL002")]
    res = run(["check", "--force-exclude", "generated/model.py", "pkg/real.py"], tmp_path, monkeypatch)
    assert findings(res.output) == [("pkg/real.py", "DL002")]
    write(tmp_path, {"pyproject.toml": "[tool.devlint]\nrespect-gitignore = false\n"})
    res = run(["check"], tmp_path, monkeypatch)
    assert len(findings(res.output)) == 4


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_file_re_included_from_an_ignored_directory_is_linted(tmp_path, monkeypatch):
    """`scripts/*` then `!scripts/animate.py` (as git reads it): what is in `scripts/` is ignored,
    not the directory itself, so the re-included script is linted and the others are not."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path, {".gitignore": "scripts/*\n!scripts/animate.py\n", "scripts/animate.py": GPU,
                     "scripts/other.py": GPU})
    assert findings(run(["check"], tmp_path, monkeypatch).output) == [("scripts/animate.py", "DL002")]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_directory_given_inside_an_ignored_one_is_walked(tmp_path, monkeypatch):
    """The installed torch package lives under `~/.pyenv`, a git checkout whose .gitignore
    says `/versions/`: `devlint <that torch dir>` must lint it (ruff and ripgrep do). Only
    patterns matching a walked entry itself prune it."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path, {".gitignore": "/versions/\n*.gen.py\n", "versions/3.11/torch/nn/a.py": GPU,
                     "versions/3.11/torch/nn/b.gen.py": GPU, "versions/3.11/torch/nn/old/c.py": GPU,
                     "versions/3.11/torch/nn/.gitignore": "old/\n", "tool.py": GPU})
    assert findings(run(["check", "."], tmp_path, monkeypatch).output) == [("tool.py", "DL002")]
    res = run(["check", "versions/3.11/torch"], tmp_path, monkeypatch)
    assert findings(res.output) == [("versions/3.11/torch/nn/a.py", "DL002")]
    res = run(["check", "--force-exclude", "versions/3.11/torch/nn/a.py", "tool.py"], tmp_path, monkeypatch)
    assert findings(res.output) == [("tool.py", "DL002")]


def test_directory_given_inside_an_excluded_one_is_walked(tmp_path, monkeypatch):
    write(tmp_path, {"pyproject.toml": '[tool.devlint]\nextend-exclude = ["legacy/", "*_old.py"]\n',
                     "legacy/v1/old.py": GPU, "legacy/v1/x_old.py": GPU, "new.py": GPU})
    assert findings(run(["check", "."], tmp_path, monkeypatch).output) == [("new.py", "DL002")]
    res = run(["check", "legacy/v1"], tmp_path, monkeypatch)
    assert findings(res.output) == [("legacy/v1/old.py", "DL002")]
    res = run(["check", "--force-exclude", "legacy/v1"], tmp_path, monkeypatch)
    assert res.exit_code == 0 and "All checks passed." in res.output


def test_gitignore_outside_a_git_repository_is_not_used(tmp_path, monkeypatch):
    write(tmp_path, {".gitignore": "*.py\n", "a.py": GPU})
    assert findings(run(["check"], tmp_path, monkeypatch).output) == [("a.py", "DL002")]


BAD_CONFIGS = [
    # (file, text, expected line, expected fragments)
    ("pyproject.toml", '[project]\nname = "x"\n\n[tool.devlint]\nselect = ["DL002"]\nselct = ["DL001"]\n',
     6, ["selct", "unknown key"]),
    ("pyproject.toml", '[tool.devlint]\nselect = ["DL002"\nignore = []\n', 3, ["invalid TOML"]),
    ("pyproject.toml", '[tool.devlint]\n\nselect = ["DL999"]\n', 3, ["select", "DL999"]),
    ("pyproject.toml", '[tool.devlint]\nignore = "DL002"\n', 2, ["ignore", "list of strings"]),
    ("devlint.toml", 'fix-style = "rocm"\n', 1, ["fix-style", "rocm"]),
    ("devlint.toml", '\ndevice-name = "my device"\n', 2, ["device-name", "identifier"]),
    ("devlint.toml", '[per-file-ignores]\n"a.py" = ["DL002"]\n"b.py" = ["XX1"]\n', 3, ["b.py", "XX1"]),
    ("devlint.toml", '[tool.devlint]\nselect = ["DL001"]\n', 1, ["tool", "unknown key"]),
    ("pyproject.toml", '[tool.devlint.per-file-ignores]\n"x.py" = "DL002"\n', 2, ["x.py", "list"]),
]


@pytest.mark.parametrize("name,text,line,fragments", BAD_CONFIGS,
                         ids=[f"{n}-{i}" for i, (n, *_r) in enumerate(BAD_CONFIGS)])
def test_malformed_config_exits_2_naming_file_line_and_key(tmp_path, monkeypatch, name, text, line, fragments):
    write(tmp_path, {name: text, "mod.py": GPU})
    res = run(["check", "mod.py"], tmp_path, monkeypatch)
    assert res.exit_code == 2
    msg = res.output.strip().splitlines()[-1]
    assert msg.startswith("devlint: error: ")
    assert f"{tmp_path / name}:{line}:" in msg, msg
    for frag in fragments:
        assert frag in msg, msg


def test_missing_explicit_config_exits_2(tmp_path, monkeypatch):
    write(tmp_path, {"mod.py": GPU})
    res = run(["check", "--config", "nope.toml", "mod.py"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and "nope.toml" in res.output and "cannot read" in res.output


# --- target-devices: a project that runs only on CUDA by design says so once ---------------

CUDA_ONLY = ("import torch\n\nx = torch.ones(2).cuda()\nm = torch.load('m.pt')\n"
             "for i in range(3):\n    w = torch.ones(3).to('cuda')\n")


def test_target_devices_cuda_turns_portability_rules_off(tmp_path, monkeypatch):
    write(tmp_path, {"train.py": CUDA_ONLY})
    before = {code for _, code in findings(run(["check", "--output-format", "concise", "."], tmp_path,
                                                monkeypatch).output)}
    assert {"DL002", "DL005"} <= before
    write(tmp_path, {"pyproject.toml": '[tool.devlint]\ntarget-devices = ["cuda"]\n'})
    res = CliRunner().invoke(main, ["check", "--output-format", "concise", "."], catch_exceptions=False)
    codes = {code for _, code in findings(res.output)}
    assert not codes & {"DL002", "DL004", "DL005"}, res.output
    assert "DL007" in codes  # a host build copied to the GPU still costs a copy there


def test_target_devices_explicit_selection_wins(tmp_path, monkeypatch):
    write(tmp_path, {"train.py": CUDA_ONLY,
                     "pyproject.toml": '[tool.devlint]\ntarget-devices = ["cuda"]\nextend-select = ["DL005"]\n'})
    codes = {code for _, code in findings(run(["check", "--output-format", "concise", "."], tmp_path,
                                               monkeypatch).output)}
    assert "DL005" in codes and "DL002" not in codes


def test_dl010_is_opt_in(tmp_path, monkeypatch):
    """DL010 is porting advice (a CPU-only script runs, only slower): off by default, on when
    selected, on the command line or in the config, whatever `target-devices` says."""
    script = ("import torch\nimport torch.nn as nn\n\nmodel = nn.Linear(4, 2)\n"
              "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
              "for step in range(3):\n    x = torch.randn(8, 4)\n    loss = model(x).sum()\n"
              "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n")
    write(tmp_path, {"train.py": script})

    def codes(*args):
        return {c for _, c in findings(run(["check", "--output-format", "concise", *args, "."], tmp_path,
                                           monkeypatch).output)}
    assert "DL010" not in codes()
    assert "DL010" in codes("--extend-select", "DL010")
    assert "DL010" in codes("--select", "DL010")
    write(tmp_path, {"pyproject.toml": '[tool.devlint]\nextend-select = ["DL010"]\n'})
    assert "DL010" in codes()
    write(tmp_path, {"pyproject.toml": '[tool.devlint]\ntarget-devices = ["cpu"]\nextend-select = ["DL010"]\n'})
    assert "DL010" in codes()


@pytest.mark.parametrize("value", ['["tpu"]', "[]", '"cuda"'])
def test_target_devices_invalid_is_one_line_error(tmp_path, monkeypatch, value):
    write(tmp_path, {"train.py": GPU, "pyproject.toml": f"[tool.devlint]\ntarget-devices = {value}\n"})
    res = run(["check", "."], tmp_path, monkeypatch)
    assert res.exit_code == 2
    assert "target-devices" in res.output and "pyproject.toml:2" in res.output
    assert "Traceback" not in res.output
