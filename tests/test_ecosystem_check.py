"""The ecosystem check (benchmarks/ecosystem.py and its extractor) on a tiny corpus made
here: a repository at a pinned commit, extracted outside the project, linted, scored
against labels (precision, weighted recall), diffed against a saved run. And the
committed labels are facts about lines: no source text."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ECO = ROOT / "benchmarks" / "ecosystem.py"
EXTRACT = ROOT / "benchmarks" / "ecosystem" / "extract.py"
LABEL_KEYS = {"repo", "commit", "path", "cell", "line", "hash", "rule", "bug", "confidence", "why", "reason",
              "elsewhere", "source", "weight"}

SCRIPT = ("import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 2).cuda()\n"
          "if torch.cuda.is_available():\n    x = torch.ones(4).cuda()\n"
          "state = torch.load('ckpt.pt')\nprint(model)\n")


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make_corpus(tmp_path: Path) -> tuple[Path, Path, str]:
    origin = tmp_path / "mirror" / "someone+demo" / "repo"
    origin.mkdir(parents=True)
    git("init", "-q", cwd=origin)
    (origin / "train.py").write_text(SCRIPT)
    git("add", ".", cwd=origin)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=origin)
    commit = git("rev-parse", "HEAD", cwd=origin)
    (origin / "train.py").write_text("print('a later commit')\n")  # the pin, not the tip, is extracted
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "two", cwd=origin)
    manifest = tmp_path / "repos.toml"
    manifest.write_text(f'seed = 1\n\n[[repo]]\nname = "someone/demo"\ncommit = "{commit}"\n'
                        'kind = "research"\nset = "tune"\n')
    return manifest, tmp_path / "mirror", commit


def line_hash(text: str) -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ecosystem import line_hash as h

    return h(text)


def test_extract_lint_score_and_diff(tmp_path):
    manifest, mirror, commit = make_corpus(tmp_path)
    src = tmp_path / "src"
    ex = subprocess.run([sys.executable, str(EXTRACT), str(src), "--mirror", str(mirror), "--manifest", str(manifest)],
                        capture_output=True, text=True)
    assert ex.returncode == 0, ex.stderr
    assert (src / "someone+demo" / "train.py").read_text() == SCRIPT
    assert (src / "someone+demo" / ".git").is_dir()  # a checkout's root marker: devlint's project root
    lines = SCRIPT.splitlines()
    base = {"repo": "someone/demo", "commit": commit, "path": "train.py", "cell": None, "confidence": "high",
            "why": "test", "reason": "other", "elsewhere": False, "weight": 1.0}
    labels = [
        {**base, "line": 4, "hash": line_hash(lines[3]), "rule": "DL002", "bug": True, "source": "finding"},
        {**base, "line": 7, "hash": line_hash(lines[6]), "rule": "DL005", "bug": False, "source": "finding"},
        # a bug devlint does not report, drawn from a stratum of 3 lines of which 1 was sampled
        {**base, "line": 6, "hash": line_hash(lines[5]), "rule": "DL002", "bug": True, "source": "sample",
         "weight": 3.0},
    ]
    lab = tmp_path / "labels.jsonl"
    lab.write_text("".join(json.dumps(r) + "\n" for r in labels))
    run = tmp_path / "run.json"
    out = subprocess.run([sys.executable, str(ECO), str(src), "--manifest", str(manifest), "--labels", str(lab),
                          "--save", str(run), "-j", "1"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {ln.split()[0]: ln.split() for ln in out.stdout.splitlines() if ln.startswith("  DL0")}
    # DL002: 1 finding, true; missed 3.0 (weighted): recall 1 / (1 + 3) = 0.25
    assert rows["DL002"][1:3] == ["1", "1"] and rows["DL002"][-2:] == ["1.00", "0.25"]
    assert rows["DL005"][1:4] == ["1", "0", "1"] and rows["DL005"][-2] == "0.00"
    assert "crashes: 0" in out.stdout
    # a drifted line (its hash no longer matches) is not matched to its old label
    (src / "someone+demo" / "train.py").write_text(SCRIPT.replace("nn.Linear(4, 2).cuda()", "nn.Linear(4, 3).cuda()"))
    again = subprocess.run([sys.executable, str(ECO), str(src), "--manifest", str(manifest), "--labels", str(lab),
                            "--diff", str(run), "-j", "1"], capture_output=True, text=True, cwd=tmp_path)
    assert "appeared: 1" in again.stdout and "vanished: 1" in again.stdout, again.stdout
    assert "[unlabelled]" in again.stdout and "[labelled bug]" in again.stdout


def test_a_notebook_that_is_not_json_is_bad_input_not_a_crash(tmp_path):
    manifest, mirror, commit = make_corpus(tmp_path)
    src = tmp_path / "src"
    subprocess.run([sys.executable, str(EXTRACT), str(src), "--mirror", str(mirror), "--manifest", str(manifest)],
                   check=True, capture_output=True)
    # a notebook committed with merge-conflict markers: devlint names it, exits 2 and lints the rest
    (src / "someone+demo" / "nb.ipynb").write_text('{\n "cells": [\n<<<<<<< HEAD\n  {}\n]}\n')
    out = subprocess.run([sys.executable, str(ECO), str(src), "--manifest", str(manifest), "--labels", str(tmp_path / "none.jsonl"),
                          "-j", "1"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "crashes: 0" in out.stdout and "not valid (named, the rest linted): 1" in out.stdout, out.stdout
    assert "nb.ipynb: not a valid notebook" in out.stdout
    assert "3 findings" in out.stdout  # train.py is still linted (DL002, DL005, DL007)


def test_committed_labels_are_facts_about_lines():
    path = ROOT / "benchmarks" / "ecosystem" / "labels.jsonl"
    records = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    assert len(records) >= 800
    for r in records:
        # no source text travels with a label; `corrected` (LABELING.md) is the one optional key
        assert LABEL_KEYS <= set(r) <= LABEL_KEYS | {"corrected"}, set(r) ^ LABEL_KEYS
        assert re.match(r"20\d\d-\d\d-\d\d: ", r.get("corrected", "2000-01-01: "))
        assert isinstance(r["bug"], bool) and r["confidence"] in ("high", "medium")
        assert len(r["hash"]) == 8 and len(r["commit"]) == 40 and r["line"] >= 1
        assert r["source"] in ("finding", "sample") and r["why"]


def test_a_label_of_a_code_a_merged_finding_stands_for_is_no_miss():
    # `torch.zeros(3).cuda()` is reported once, as DL007 "(also DL002: ...)": a DL002 label on
    # that line is found, under the code that subsumes it; a DL003 label there is still a miss
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import ecosystem

    repo = {"name": "o/r", "commit": "0" * 40, "set": "tune", "kind": "research"}
    finding = {"repo": "o/r", "set": "tune", "path": "t.py", "cell": None, "line": 3, "end_line": 3,
               "rule": "DL007", "hash": "aaaaaaaa",
               "message": "`torch.zeros(3)` is built on the host (also DL002: `.cuda()` hard-codes the CUDA device)"}
    labels = [{"repo": "o/r", "path": "t.py", "cell": None, "line": 3, "hash": "aaaaaaaa", "rule": rule,
               "bug": True, "weight": 1.0} for rule in ("DL007", "DL002", "DL003")]
    table = ecosystem.score({"findings": [finding], "repos": {"o/r": {}}}, labels, [repo])
    assert table[("tune", "DL007")]["true"] == 1
    assert table[("tune", "DL002")]["missed"] == 0
    assert table[("tune", "DL003")]["missed"] == 1


def test_a_bug_in_a_file_the_repository_gitignores_is_no_miss(tmp_path):
    # devlint's discovery skips a tracked file its repository's .gitignore excludes (as ruff
    # does): a labelled bug there is no miss of a rule, and the recall sample leaves it out
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import ecosystem

    root = tmp_path / "o+r"
    (root / ".git").mkdir(parents=True)
    (root / ".gitignore").write_text("**/video_llama.py\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "video_llama.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    (root / "train.py").write_text("import torch\ny = torch.ones(2).cuda()\n")
    assert ecosystem.ignored_files(str(root)) == ["pkg/video_llama.py"]
    repo = {"name": "o/r", "commit": "0" * 40, "set": "tune", "kind": "research"}
    labels = [{"repo": "o/r", "path": path, "cell": None, "line": 2, "hash": "aaaaaaaa", "rule": "DL002",
               "bug": True, "weight": 1.0} for path in ("pkg/video_llama.py", "train.py")]
    run_ = {"findings": [], "repos": {"o/r": {"ignored": ["pkg/video_llama.py"]}}}
    table = ecosystem.score(run_, labels, [repo])
    assert table[("tune", "DL002")]["missed"] == 1 and table[("tune", "DL002")]["ignored_lines"] == 1
    sample = ecosystem.miss_sample(str(tmp_path), [repo], run_, 6)
    assert {s["path"] for s in sample} == {"train.py"}


def test_a_second_line_with_the_same_text_does_not_borrow_a_label():
    # a config with `device='cuda',` in its train dict (read: a bug) and its test dict (never
    # read): a finding on the unlabelled one is unlabelled, not counted with the other's label
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ecosystem import LabelIndex

    h = line_hash("device='cuda',")
    lab = {"repo": "o/r", "path": "cfg.py", "cell": None, "rule": "DL002", "hash": h, "line": 22, "bug": True}
    index = LabelIndex([lab])
    assert index.find("o/r", "cfg.py", None, "DL002", h, 22) is lab
    assert index.find("o/r", "cfg.py", None, "DL002", h, 41) is None
