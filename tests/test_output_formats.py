"""CI output formats through the real CLI: SARIF 2.1.0 (validated against the official
schema), GitHub workflow commands, JSON lines, --statistics."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from devlint.cli import main

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO.parent / "shared" / "schemas" / "sarif-schema-2.1.0.json"

SRC = """\
import torch

y = torch.ones(2)
y.float()
x = torch.ones(2).cuda()
model = torch.nn.Linear(2, 2).cuda(0)
"""


def run(args, cwd: Path, monkeypatch):
    monkeypatch.chdir(cwd)
    # these tests exercise DL001/DL002 on `torch.ones(2).cuda()` lines, which DL007
    # (host-alloc-then-move) rightly flags too: keep it out of their expectations
    if args and args[0] in ("rules", "rule", "clean"):
        return CliRunner().invoke(main, args, catch_exceptions=False)
    return CliRunner().invoke(main, [*args, "--ignore", "DL007"], catch_exceptions=False)


@pytest.fixture
def project(tmp_path):
    (tmp_path / ".git").mkdir()  # the repository root SARIF URIs are relative to
    (tmp_path / "src" / "my pkg").mkdir(parents=True)
    (tmp_path / "src" / "my pkg" / "train.py").write_text(SRC)
    (tmp_path / "clean.py").write_text("import torch\nprint(torch.ones(1))\n")
    return tmp_path


def _sarif(project, monkeypatch, *extra):
    res = run(["check", "--output-format", "sarif", *extra, "."], project, monkeypatch)
    assert res.exit_code == 1, res.output
    return json.loads(res.output)


def test_sarif_validates_against_the_official_schema(project, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is needed to validate SARIF")
    if not SCHEMA.exists():
        pytest.skip(f"the SARIF 2.1.0 schema is not at {SCHEMA}")
    schema = json.loads(SCHEMA.read_text())
    doc = _sarif(project, monkeypatch)
    jsonschema.validate(doc, schema)
    # a clean run validates too
    res = run(["check", "--output-format", "sarif", "clean.py"], project, monkeypatch)
    assert res.exit_code == 0
    jsonschema.validate(json.loads(res.output), schema)


def test_sarif_rules_results_uris_and_columns(project, monkeypatch):
    doc = _sarif(project, monkeypatch)
    assert doc["version"] == "2.1.0"
    run_ = doc["runs"][0]
    rules = {r["id"]: r for r in run_["tool"]["driver"]["rules"]}
    assert {"DL001", "DL002"} <= set(rules)
    dl2 = rules["DL002"]
    assert dl2["name"] == "hardcoded-cuda"
    assert dl2["shortDescription"]["text"] == "hard-coded CUDA device outside an availability guard"
    assert dl2["fullDescription"]["text"].startswith("Flags code that hard-codes the CUDA device")
    assert "## Why is this bad?" in dl2["help"]["markdown"]
    results = run_["results"]
    assert sorted((r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
                  for r in results) == [("DL001", 4), ("DL002", 5), ("DL002", 6)]
    src_lines = SRC.splitlines()
    for r in results:
        assert run_["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        loc = r["locations"][0]["physicalLocation"]
        # repo-relative, percent-encoded URI against %SRCROOT%
        assert loc["artifactLocation"] == {"uri": "src/my%20pkg/train.py", "uriBaseId": "%SRCROOT%"}
        reg = loc["region"]
        line = src_lines[reg["startLine"] - 1]
        flagged = line[reg["startColumn"] - 1: reg["endColumn"] - 1]  # 1-based, end one past the end
        assert flagged in ("y.float()", "torch.ones(2).cuda()", "torch.nn.Linear(2, 2).cuda(0)"), flagged
    root = run_["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert unquote(root).rstrip("/").endswith(project.name)


def test_github_annotations(project, monkeypatch):
    (project / "a,b.py").write_text("import torch\n\nx = torch.ones(2).cuda()\n")
    res = run(["check", "--output-format", "github", "a,b.py", "src"], project, monkeypatch)
    assert res.exit_code == 1
    lines = res.output.splitlines()
    # endLine/endColumn (inclusive, GitHub's convention) underline `torch.ones(2).cuda()`
    assert lines[0] == ("::error file=a%2Cb.py,line=3,col=5,endLine=3,endColumn=24,title=devlint (DL002)::"
                        "`.cuda()` hard-codes the CUDA device: raises on a machine without CUDA")
    assert lines[1].startswith("::error file=src/my pkg/train.py,line=4,col=1,endLine=4,endColumn=9,"
                               "title=devlint (DL001)::")
    assert all(line.startswith("::error file=") for line in lines) and len(lines) == 4


def test_json_lines(project, monkeypatch):
    res = run(["check", "--output-format", "json-lines", "."], project, monkeypatch)
    assert res.exit_code == 1
    items = [json.loads(line) for line in res.output.splitlines()]
    assert [(i["code"], i["line"], i["column"]) for i in items] == [("DL001", 4, 1), ("DL002", 5, 5), ("DL002", 6, 9)]
    assert items[1]["fixable"] is True and items[1]["filename"] == str(Path("src/my pkg/train.py"))


def test_statistics(project, monkeypatch):
    res = run(["check", "--statistics", "."], project, monkeypatch)
    assert res.exit_code == 1
    *rows, total = res.output.splitlines()
    assert [row.split("\t") for row in rows] == [["2", "DL002", "[-] hardcoded-cuda"],
                                                 ["1", "DL001", "[*] unassigned-transfer"]]
    assert total == "Found 3 findings (2 fixable with --fix)."
    res = run(["check", "--statistics", "--unsafe-fixes", "--output-format", "json", "."], project, monkeypatch)
    assert json.loads(res.output) == [
        {"code": "DL002", "name": "hardcoded-cuda", "count": 2, "fixable": 2},
        {"code": "DL001", "name": "unassigned-transfer", "count": 1, "fixable": 1},
    ]
    res = run(["check", "--statistics", "clean.py"], project, monkeypatch)
    assert res.exit_code == 0 and res.output == "All checks passed.\n"


def test_sarif_reports_unreadable_files_as_notifications(project, monkeypatch):
    res = run(["check", "--output-format", "sarif", "missing.py", "clean.py"], project, monkeypatch)
    assert res.exit_code == 2
    doc = json.loads(res.output[res.output.index("{"):])
    inv = doc["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    assert "missing.py" in inv["toolExecutionNotifications"][0]["message"]["text"]
