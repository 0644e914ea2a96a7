"""action.yml (the GitHub Action): its inputs and steps fit together, and its devlint steps,
run as the runner would run them (bash, the step's env), produce a SARIF report with the
findings and the annotations, with the exit statuses the action promises."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML comes with pre-commit (the `test` extra)")

ROOT = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
STEPS = ACTION["runs"]["steps"]
EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")

BUGGY = "import torch\n\nmodel = torch.nn.Linear(4, 2).cuda()\nx = torch.ones(3)\nx.to('cpu')\n"


def step(name_part: str) -> dict:
    (found,) = [s for s in STEPS if name_part in s.get("name", "")]
    return found


def evaluate(value: str, inputs: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        expr = m.group(1)
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        assert expr == "github.action_path", expr
        return str(ROOT)
    return EXPR.sub(sub, str(value))


def run_step(s: dict, cwd: Path, **overrides: str) -> subprocess.CompletedProcess:
    """A `run:` step as the runner runs it: `bash -e {0}` with the step's env."""
    inputs = {k: v.get("default", "") for k, v in ACTION["inputs"].items()} | overrides
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    env.update({k: evaluate(v, inputs) for k, v in s.get("env", {}).items()})
    assert s["shell"] == "bash"
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s["run"]], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_inputs_and_steps_are_coherent():
    assert ACTION["runs"]["using"] == "composite"
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    used = {e.removeprefix("inputs.") for e in EXPR.findall(text) if e.startswith("inputs.")}
    used |= {m for m in re.findall(r"inputs\.([\w-]+)", text)}  # in `if:` conditions too
    assert used == set(ACTION["inputs"]), "every input is used, no undeclared input is"
    for s in STEPS:
        assert ("uses" in s) != ("run" in s)
        if "run" in s:
            assert s["shell"] == "bash"  # composite steps must name a shell
            assert "${{" not in s["run"], "inputs reach scripts through env, never spliced into code"
    setup, install, sarif, upload, annotate = STEPS
    assert setup["uses"].startswith("actions/setup-python@")
    assert install["env"]["DEVLINT_SOURCE"] == "${{ github.action_path }}"
    assert '"$DEVLINT_SOURCE"' in install["run"] and "pip install" in install["run"]
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    # the file the SARIF step writes is the file uploaded
    assert sarif["env"]["DEVLINT_SARIF"] == upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}"
    assert '> "$DEVLINT_SARIF"' in sarif["run"]
    assert STEPS.index(sarif) < STEPS.index(upload) < STEPS.index(annotate)  # failing last


def test_version_input_installs_that_release_from_the_index():
    install = step("Install")
    assert 'pip install --disable-pip-version-check "devlint==$DEVLINT_VERSION"' in install["run"]
    assert install["env"]["DEVLINT_VERSION"] == "${{ inputs.version }}"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(BUGGY)
    (tmp_path / "src" / "clean.py").write_text("import os\nprint(os.sep)\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # SARIF URIs: repo-relative
    return tmp_path


def test_sarif_step_writes_the_findings_and_exits_0(project):
    res = run_step(step("SARIF report"), project, paths="src")
    assert res.returncode == 0, res.stderr
    report = json.loads((project / "devlint.sarif").read_text())
    results = report["runs"][0]["results"]
    assert sorted(r["ruleId"] for r in results) == ["DL001", "DL002"]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results} == {"src/train.py"}


def test_args_input_reaches_devlint(project):
    res = run_step(step("SARIF report"), project, paths="src", args="--ignore DL002 --no-cache",
                   **{"sarif-file": "report.sarif"})
    assert res.returncode == 0, res.stderr
    results = json.loads((project / "report.sarif").read_text())["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["DL001"]


def test_sarif_step_fails_on_a_usage_error(project):
    res = run_step(step("SARIF report"), project, paths="src", args="--select NOPE")
    assert res.returncode == 2 and "NOPE" in res.stderr


def test_annotation_step_annotates_and_fails_on_findings(project):
    res = run_step(step("annotations"), project, paths="src")
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert any(line.startswith("::error file=src/train.py,line=3,") and "DL002" in line for line in lines)
    res = run_step(step("annotations"), project, paths="src", **{"fail-on-findings": "false"})
    assert res.returncode == 0 and "::error file=src/train.py" in res.stdout
    shutil.rmtree(project / "src")
    (project / "src").mkdir()
    (project / "src" / "clean.py").write_text("print(1)\n")
    assert run_step(step("annotations"), project, paths="src").returncode == 0
