"""The README's snippets work as written: the Quick start is two commands, the pre-commit
snippet is a config pre-commit accepts for a hook that exists, the CI snippets run real
devlint commands and use the action's real inputs, the editor snippets start the real
server command."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from devlint.cli import main

yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit (the `test` extra)")

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
BUGGY = "import torch\n\nmodel = torch.nn.Linear(4, 2).cuda()\n"


def section(title: str) -> str:
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert m, f"README has no section {title!r}"
    return m.group(1)


def blocks(text: str, lang: str | None = None) -> list[str]:
    return [body for kind, body in FENCE.findall(text) if lang is None or kind == lang]


def yaml_block(text: str, key: str) -> dict:
    (found,) = [y for y in map(yaml.safe_load, blocks(text, "yaml")) if key in y]
    return found


def test_quick_start_is_two_commands_and_says_what_to_expect():
    text = section("Quick start")
    first = blocks(text)[0]
    commands = [line for line in first.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(commands) == 2
    assert commands[1] == (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]  # what CI runs
    prose = FENCE.sub("", text)
    for needed in ("Python >= 3.11", "python3.11 -m venv .venv", "status 1", "9–15 minutes",
                   "--index-url https://download.pytorch.org/whl/cpu", "DL004"):
        assert needed in prose, needed
    assert 'requires-python = ">=3.11"' in (ROOT / "pyproject.toml").read_text()


def test_quick_start_first_command_exits_1_with_findings(tmp_path, monkeypatch):
    """What the prose promises: the example has findings, so `devlint check` exits 1."""
    example = ROOT / "examples" / "legacy_gpu_train.py"
    monkeypatch.chdir(tmp_path)
    for args in (["check", "--no-cache", str(example)], ["check", "--no-cache", "--diff", str(example)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1, res.output


def test_precommit_snippet_is_a_config_for_a_real_hook():
    config = yaml_block(section("In your workflow"), "repos")
    (repo,) = config["repos"]
    assert repo["repo"].startswith("https://") and "<org>" in repo["repo"]  # the placeholder, marked
    assert re.fullmatch(r"[0-9a-f]{40}", repo["rev"]), "rev is a full commit sha (no release tag yet)"
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    ids = {h["id"] for h in hooks}
    assert {h["id"] for h in repo["hooks"]} <= ids
    assert "pre-commit autoupdate --freeze" in README
    # the sha is a commit of this repository whose hook file has that hook
    git = ["git", "-C", str(ROOT)]
    shallow = subprocess.run([*git, "rev-parse", "--is-shallow-repository"], capture_output=True, text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a full git checkout: the sha cannot be looked up")
    shown = subprocess.run([*git, "show", f"{repo['rev']}:.pre-commit-hooks.yaml"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert {h["id"] for h in repo["hooks"]} <= {h["id"] for h in yaml.safe_load(shown.stdout)}


def test_ci_snippet_installs_from_the_repository_and_runs_real_commands(tmp_path, monkeypatch):
    from packaging.requirements import Requirement

    workflow = yaml_block(section("In your workflow").split("### The GitHub Action", 1)[0], "jobs")
    (job,) = workflow["jobs"].values()
    assert job["permissions"]["security-events"] == "write"
    runs = [s["run"] for s in job["steps"] if "run" in s]
    (install,) = [r for r in runs if r.startswith("pip install")]
    req = Requirement(shlex.split(install)[2])
    assert req.name == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert req.url.startswith("git+https://github.com/<org>/devlint@")  # placeholder, marked
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(BUGGY)
    written = None
    for line in (r for r in runs if r.startswith("devlint ")):
        args = shlex.split(line)
        target = args[args.index(">") + 1] if ">" in args else None
        args = args[1:args.index(">")] if target else args[1:]
        res = CliRunner().invoke(main, [*args, "--no-cache"])
        assert res.exit_code == (0 if "--exit-zero" in args else 1), (line, res.output)
        if target:
            written = target
            assert json.loads(res.stdout)["runs"][0]["results"][0]["ruleId"] == "DL002"
        else:
            assert res.stdout.startswith("::error file=train.py,line=3,")
    assert written == upload[0]["with"]["sarif_file"]  # the file written is the file uploaded


def test_action_snippet_uses_real_inputs():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    text = section("In your workflow")
    workflow = yaml.safe_load(blocks(text.split("### The GitHub Action", 1)[1], "yaml")[0])
    (job,) = workflow["jobs"].values()
    assert job["permissions"]["security-events"] == "write"  # upload-sarif needs it
    (step,) = [s for s in job["steps"] if s.get("uses", "").startswith("<org>/devlint@")]
    assert set(step["with"]) <= set(action["inputs"])
    documented = set(re.findall(r"^\| `([\w-]+)` \|", text, re.M))
    assert documented == set(action["inputs"])  # the input table is complete and invents nothing
    for name in documented:  # and its defaults are the action's
        row = re.search(rf"^\| `{name}` \|\s*`?([^`|]*?)`?\s*\|", text, re.M).group(1).strip()
        assert row == action["inputs"][name].get("default", ""), name


def test_editor_snippets_start_the_real_server():
    from devlint.server import FIX_ALL

    text = section("In your workflow")
    (lua,) = blocks(text, "lua")
    assert 'cmd = { "devlint", "server" }' in lua
    (settings,) = [json.loads(b) for b in blocks(text, "json")]
    assert [settings["glspc.server.command"], *settings["glspc.server.commandArguments"]] == ["devlint", "server"]
    assert FIX_ALL in settings["editor.codeActionsOnSave"]
    assert 'pip install "devlint[lsp]"' in text
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("pygls") for dep in extras["lsp"])
    assert CliRunner().invoke(main, ["server", "--help"]).exit_code == 0


def test_workflow_docs_pin_the_same_revision_and_install_from_the_repository():
    """docs/workflows.md repeats the pre-commit and CI snippets: they say what the README says."""
    docs = (ROOT / "docs" / "workflows.md").read_text(encoding="utf-8")
    readme_rev = yaml_block(section("In your workflow"), "repos")["repos"][0]["rev"]
    (config,) = [y for y in map(yaml.safe_load, blocks(docs, "yaml")) if isinstance(y, dict) and "repos" in y]
    assert config["repos"][0]["rev"] == readme_rev
    # no release exists: nothing tells a user to install devlint from the package index
    from_index = re.findall(r"pip install (?:-U )?[\"']?devlint(?:\[\w+\])?[\"']?(?=\s|$)(?! @)", docs + README)
    assert not from_index, from_index
    assert "git+https://github.com/<org>/devlint@<sha>" in docs
