"""Notebooks through the real CLI: cell-by-cell locations, IPython syntax left alone,
--fix rewrites only changed cells and keeps outputs, metadata and JSON formatting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from devlint.cli import main


def run(args, cwd: Path, monkeypatch):
    monkeypatch.chdir(cwd)
    # these tests exercise DL001/DL002 on `torch.ones(2).cuda()` lines, which DL007
    # (host-alloc-then-move) rightly flags too: keep it out of their expectations
    if args and args[0] in ("rules", "rule", "clean"):
        return CliRunner().invoke(main, args, catch_exceptions=False)
    return CliRunner().invoke(main, [*args, "--ignore", "DL007"], catch_exceptions=False)


def code(source, outputs=(), count=None, meta=None):
    return {"cell_type": "code", "execution_count": count, "metadata": meta or {},
            "outputs": list(outputs), "source": source}


def notebook(cells, lang="python"):
    return {"cells": cells,
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": lang, "name": "python3"},
                         "language_info": {"name": lang, "version": "3.11.7"}},
            "nbformat": 4, "nbformat_minor": 5}


STREAM = {"name": "stdout", "output_type": "stream", "text": ["tensor([1., 1.])\n"]}
CELLS = [
    {"cell_type": "markdown", "metadata": {}, "source": ["# Training on the GPU\n", "Call `.cuda()` here."]},
    code(["%matplotlib inline\n", "!pip install --quiet torch\n", "import torch\n",
          "torch.manual_seed(0)"], count=1),
    code(["x = torch.ones(2).cuda()\n", "files = !ls\n", "for i in range(2):\n",
          "    %time y = x + i\n", "torch.ones?\n", "print(x.cpu())"], outputs=[STREAM], count=2,
         meta={"tags": ["gpu"], "collapsed": False}),
    code("%%bash\necho model.cuda()\n", count=3),
    code(["z = torch.zeros(3).cuda()  # noqa: DL002\n", "w = torch.zeros(3, device='cuda')\n",
          "print(w.sum().item(), z.sum().item())"], count=4),
    {"cell_type": "raw", "metadata": {}, "source": ["x.cuda()"]},
]


def write_nb(path: Path, nb: dict, indent=1, ascii_=False, newline=True) -> bytes:
    raw = json.dumps(nb, indent=indent, ensure_ascii=ascii_) + ("\n" if newline else "")
    path.write_text(raw, encoding="utf-8")
    return raw.encode()


def test_lint_reports_cell_and_line_and_skips_ipython_syntax(tmp_path, monkeypatch):
    write_nb(tmp_path / "train.ipynb", notebook(CELLS))
    res = run(["check", "train.ipynb"], tmp_path, monkeypatch)
    assert res.exit_code == 1
    found = [line.split(" [*]")[0] for line in res.output.splitlines() if " DL" in line and line[0] != " "]
    assert found == ["train.ipynb:cell 3:1:5:", "train.ipynb:cell 5:2:27:"], res.output
    assert "DL000" not in res.output  # magics, shell lines and `obj?` were never parsed
    res = run(["check", "--output-format", "json", "train.ipynb"], tmp_path, monkeypatch)
    assert [(d["cell"], d["line"]) for d in json.loads(res.output)] == [(3, 1), (5, 2)]


def test_discovery_picks_up_notebooks(tmp_path, monkeypatch):
    (tmp_path / "nbs" / ".ipynb_checkpoints").mkdir(parents=True)
    write_nb(tmp_path / "nbs" / "a.ipynb", notebook(CELLS))
    write_nb(tmp_path / "nbs" / ".ipynb_checkpoints" / "a-checkpoint.ipynb", notebook(CELLS))
    res = run(["check", "--statistics", "."], tmp_path, monkeypatch)
    assert res.output.split("\t")[0] == "2"  # the checkpoint copy (a hidden dir) is skipped


@pytest.mark.parametrize("indent,ascii_,newline,as_list", [
    (1, False, True, True),     # what Jupyter writes
    (2, True, False, True),     # other tools: 2 spaces, \\u escapes, no final newline
    (4, False, True, False),    # sources as one string
])
def test_fix_rewrites_only_changed_cells_and_keeps_formatting(tmp_path, monkeypatch, indent, ascii_, newline,
                                                               as_list):
    cells = json.loads(json.dumps(CELLS))
    cells[0]["source"].append(" — ünïcode")
    if not as_list:
        for c in cells:
            c["source"] = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
    nb = notebook(cells)
    path = tmp_path / "train.ipynb"
    before = write_nb(path, nb, indent, ascii_, newline)
    res = run(["check", "--fix", "train.ipynb"], tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    after = path.read_bytes()
    new = json.loads(after)
    # the file is formatted exactly as before, apart from the changed sources
    assert after == json.dumps(new, indent=indent, ensure_ascii=ascii_).encode() + (b"\n" if newline else b"")
    assert list(new) == list(nb) and [list(c) for c in new["cells"]] == [list(c) for c in cells]
    for i, (old_c, new_c) in enumerate(zip(cells, new["cells"])):
        if i in (1, 2, 4):
            continue
        assert new_c == old_c, f"cell {i + 1} changed"
    for i in (1, 2, 4):  # outputs, metadata, counts kept
        assert {k: v for k, v in new["cells"][i].items() if k != "source"} == \
               {k: v for k, v in cells[i].items() if k != "source"}
    src = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in new["cells"]]
    assert src[1] == ("%matplotlib inline\n!pip install --quiet torch\nimport torch\n\n"
                      "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n\n"
                      "torch.manual_seed(0)")
    assert src[2] == ("x = torch.ones(2).to(device)\nfiles = !ls\nfor i in range(2):\n"
                      "    %time y = x + i\ntorch.ones?\nprint(x.cpu())")
    assert src[4].startswith("z = torch.zeros(3).cuda()  # noqa: DL002\nw = torch.zeros(3, device=device)\n")
    if as_list:
        assert new["cells"][2]["source"][0] == "x = torch.ones(2).to(device)\n"
    # a second --fix changes nothing
    run(["check", "--fix", "train.ipynb"], tmp_path, monkeypatch)
    assert path.read_bytes() == after
    assert before != after


def _run_cells(nb_path: Path) -> subprocess.CompletedProcess:
    """Execute a notebook's code cells the way a kernel would, minus IPython syntax."""
    nb = json.loads(nb_path.read_text())
    lines = []
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        text = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        if text.startswith("%%"):
            continue
        for line in text.splitlines():
            s = line.strip()
            if s.startswith(("%", "!")) or s.endswith("?") or "= !" in s:
                line = line[: len(line) - len(line.lstrip())] + "pass"
            lines.append(line)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True,
                          timeout=120, env=env)


def test_fixed_notebook_runs_on_cpu(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    cells = json.loads(json.dumps(CELLS))
    cells[4]["source"][0] = "z = torch.zeros(3)\n"
    path = tmp_path / "train.ipynb"
    write_nb(path, notebook(cells))
    before = _run_cells(path)
    assert before.returncode != 0 and "CUDA" in before.stderr
    run(["check", "--fix", "train.ipynb"], tmp_path, monkeypatch)
    after = _run_cells(path)
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines() == ["tensor([1., 1.])", "0.0 0.0"]


def test_diff_shows_cells_and_writes_nothing(tmp_path, monkeypatch):
    before = write_nb(tmp_path / "t.ipynb", notebook(CELLS))
    res = run(["check", "--diff", "t.ipynb"], tmp_path, monkeypatch)
    assert res.exit_code == 1
    assert "--- a/t.ipynb:cell 3\n+++ b/t.ipynb:cell 3\n" in res.output
    assert "-x = torch.ones(2).cuda()\n+x = torch.ones(2).to(device)\n" in res.output
    assert (tmp_path / "t.ipynb").read_bytes() == before


def test_add_noqa_in_notebook(tmp_path, monkeypatch):
    write_nb(tmp_path / "t.ipynb", notebook(CELLS))
    run(["check", "--add-noqa", "t.ipynb"], tmp_path, monkeypatch)
    new = json.loads((tmp_path / "t.ipynb").read_text())
    assert new["cells"][2]["source"][0] == "x = torch.ones(2).cuda()  # noqa: DL002\n"
    assert new["cells"][2]["source"][1:] == CELLS[2]["source"][1:]
    assert run(["check", "t.ipynb"], tmp_path, monkeypatch).exit_code == 0


def test_non_python_and_broken_notebooks(tmp_path, monkeypatch):
    r_nb = notebook([code(["x.cuda()"])], lang="R")
    before = write_nb(tmp_path / "r.ipynb", r_nb)
    res = run(["check", "--fix", "r.ipynb"], tmp_path, monkeypatch)
    assert res.exit_code == 0 and (tmp_path / "r.ipynb").read_bytes() == before
    (tmp_path / "bad.ipynb").write_text("{not json")
    res = run(["check", "bad.ipynb"], tmp_path, monkeypatch)
    assert res.exit_code == 2 and "bad.ipynb" in res.output and "invalid JSON" in res.output
    # a cell with a syntax error is reported at its cell; no fix is written
    write_nb(tmp_path / "syn.ipynb", notebook([code(["import torch\n"]), code(["x = torch.ones(2).cuda(\n"])]))
    res = run(["check", "--fix", "syn.ipynb"], tmp_path, monkeypatch)
    assert "syn.ipynb:cell 2:" in res.output and "DL000" in res.output


def test_baseline_in_notebook_survives_a_new_cell_above(tmp_path, monkeypatch):
    nb = notebook(CELLS)
    write_nb(tmp_path / "t.ipynb", nb)
    res = run(["check", "--baseline", "b.json", "--write-baseline", "t.ipynb"], tmp_path, monkeypatch)
    assert "Wrote 2 findings" in res.output
    nb["cells"].insert(1, code(["# a new first code cell\n", "print('hello')"]))
    nb["cells"].append(code(["q = torch.ones(1).cuda()"]))
    write_nb(tmp_path / "t.ipynb", nb)
    res = run(["check", "--baseline", "b.json", "t.ipynb"], tmp_path, monkeypatch)
    found = [line.split(" [*]")[0] for line in res.output.splitlines() if " DL" in line and line[0] != " "]
    assert found == ["t.ipynb:cell 8:1:5:"], res.output


ANSI = {"name": "stdout", "output_type": "stream", "text": ["\x1b[31mred\x1b[0m done\n"]}
BUGGY = ["import torch\n", "x = torch.zeros(3)\n", "x.to('cpu')\n"]


def _with_escapes(tmp_path: Path, replace) -> tuple[Path, str]:
    text = json.dumps(notebook([code(BUGGY, [ANSI], count=1)]), indent=1) + "\n"
    text = replace(text)
    path = tmp_path / "ansi.ipynb"
    path.write_text(text, encoding="utf-8")
    return path, text


def test_fix_keeps_uppercase_escapes_byte_for_byte(tmp_path, monkeypatch):
    # `\u001B` (uppercase hex) is what some tools write; Python's json writes `\u001b`
    path, text = _with_escapes(tmp_path, lambda t: t.replace("\\u001b", "\\u001B"))
    assert "\\u001B" in text
    r = run(["check", "--select", "DL001", "--fix", "--exit-zero", str(path)], tmp_path, monkeypatch)
    assert r.exit_code == 0, r.output
    assert "error" not in r.output
    new = path.read_text(encoding="utf-8")
    assert new == text.replace('"x.to(\'cpu\')\\n"', '"x = x.to(\'cpu\')\\n"')  # only the fixed line changed
    assert json.loads(new)["cells"][0]["outputs"] == [ANSI]


def test_fix_with_mixed_escape_case_writes_standard_json_escaping(tmp_path, monkeypatch):
    path, text = _with_escapes(tmp_path, lambda t: t.replace("\\u001b", "\\u001B", 1))
    assert "\\u001B" in text and "\\u001b" in text
    r = run(["check", "--select", "DL001", "--fix", "--exit-zero", str(path)], tmp_path, monkeypatch)
    assert r.exit_code == 0, r.output
    new = path.read_text(encoding="utf-8")
    assert "\\u001B" not in new and new.count("\\u001b") == 2
    nb = json.loads(new)
    assert nb["cells"][0]["source"][2] == "x = x.to('cpu')\n"
    assert nb["cells"][0]["outputs"] == [ANSI]
    r = run(["check", "--select", "DL001", "--exit-zero", str(path)], tmp_path, monkeypatch)
    assert r.exit_code == 0 and "DL001" not in r.output


@pytest.mark.parametrize("setting_cell, reported", [
    # a cell of its own that only sets the switch: the reader's setting, chosen as a flag is
    (True, False),
    # the same switch set among other code: the CUDA branch always runs, so it crashes without CUDA
    (False, True),
])
def test_a_switch_set_in_a_cell_of_its_own_is_the_readers_choice(tmp_path, monkeypatch, setting_cell, reported):
    use = ["x = torch.ones(2)\n", "if USE_CUDA:\n", "    x = x.cuda()\n", "print(x)"]
    cells = ([{"cell_type": "markdown", "metadata": {}, "source": ["Without a GPU, set this to `False`."]},
              code(["import torch"], count=1), code(["USE_CUDA = True"], count=2), code(use, count=3)]
             if setting_cell else
             [code(["import torch\n", "USE_CUDA = True"], count=1), code(use, count=2)])
    write_nb(tmp_path / "tutorial.ipynb", notebook(cells))
    res = run(["check", "--select", "DL002", "tutorial.ipynb"], tmp_path, monkeypatch)
    assert ("DL002" in res.output) is reported, res.output
    assert res.exit_code == (1 if reported else 0)


@pytest.mark.parametrize("read, reported", [
    # a notebook's device name that no cell reads places nothing (no module imports a notebook)
    (False, False),
    (True, True),
])
def test_a_notebook_device_that_no_cell_reads_places_nothing(tmp_path, monkeypatch, read, reported):
    cells = [code(["import torch\n", "device = 'cuda:1'"], count=1),
             code(["x = torch.ones(2)\n", "print(x.to(device))" if read else "print(x)"], count=2)]
    write_nb(tmp_path / "scratch.ipynb", notebook(cells))
    res = run(["check", "--select", "DL002", "scratch.ipynb"], tmp_path, monkeypatch)
    assert ("DL002" in res.output) is reported, res.output


def _md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": [text]}


@pytest.mark.parametrize("heading, setting, reported", [
    # the notebook's settings section: a device chosen there is the reader's to edit
    ("# Setting", ['DEVICE = torch.device("cuda:0")'], False),
    ("## 2. Hyperparameters", ["BATCH = 8\n", 'CONTEXT = dict(device="cuda:0", lr=0.1)'], False),
    # any other section, or a heading that only mentions a setting in a sentence
    ("# Data", ['DEVICE = torch.device("cuda:0")'], True),
    ("# How these settings were chosen for the best results", ['DEVICE = torch.device("cuda:0")'], True),
    # a settings cell that also runs code, or moves something, is code, not a setting
    ("# Settings", ['DEVICE = torch.device("cuda:0")\n', "print(DEVICE)"], True),
    ("# Settings", ['W = torch.ones(2).to("cuda:0")'], True),
])
def test_a_device_chosen_in_the_notebooks_settings_section_is_the_readers_choice(
        tmp_path, monkeypatch, heading, setting, reported):
    cells = [code(["import torch"], count=1), _md(heading), code(setting, count=2), _md("# Model"),
             code(["x = torch.ones(2)\n", "print(x.to(DEVICE if 'DEVICE' in dir() else W.device))"], count=3)]
    write_nb(tmp_path / "tutorial.ipynb", notebook(cells))
    res = run(["check", "--select", "DL002", "tutorial.ipynb"], tmp_path, monkeypatch)
    assert ("DL002" in res.output) is reported, res.output
    assert res.exit_code == (1 if reported else 0)


def test_fixing_a_notebook_with_a_settings_section_keeps_its_cells(tmp_path, monkeypatch):
    # the settings cell stays as written; a hard-coded move in a later cell is fixed as before
    cells = [code(["import torch"], count=1), _md("# Settings"), code(['DEVICE = torch.device("cuda:0")'], count=2),
             _md("# Run"), code(["x = torch.ones(2).cuda()\n", "print(x)"], count=3)]
    path = tmp_path / "tutorial.ipynb"
    write_nb(path, notebook(cells))
    res = run(["check", "--fix", "tutorial.ipynb"], tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    new = json.loads(path.read_text())
    src = ["".join(c["source"]) for c in new["cells"]]
    assert src[:4] == ["".join(c["source"]) for c in cells[:4]]
    assert src[4] == "x = torch.ones(2).to(DEVICE)\nprint(x)"
    run(["check", "--fix", "tutorial.ipynb"], tmp_path, monkeypatch)
    assert json.loads(path.read_text()) == new


# the statement a timing magic runs is Python the notebook executes
TIMED = [
    code(["import torch\n", "x = torch.ones(4)\n"], count=1),
    code(["%timeit torch.relu(x.cuda())\n", "%time y = x.cuda()  \n", "%timeit -n 10 x.cuda()\n",
          "for i in range(2):\n", "    %time z = x + i\n", "print(y)"], count=2),
]


def test_the_statement_of_a_timing_magic_is_linted_at_its_column_in_the_cell(tmp_path, monkeypatch):
    write_nb(tmp_path / "t.ipynb", notebook(TIMED))
    res = run(["check", "--output-format", "json", "t.ipynb"], tmp_path, monkeypatch)
    found = [(d["cell"], d["line"], d["column"], d["code"]) for d in json.loads(res.output)]
    # `%timeit -n 10 ...` (options before the statement) stays an opaque magic line
    assert found == [(2, 1, 20, "DL002"), (2, 2, 11, "DL002")], res.output


def test_fixing_a_timed_statement_keeps_its_magic_and_an_untouched_one_byte_for_byte(tmp_path, monkeypatch):
    path = tmp_path / "t.ipynb"
    write_nb(path, notebook(TIMED))
    run(["check", "--fix", "t.ipynb"], tmp_path, monkeypatch)
    cells = json.loads(path.read_text())["cells"]
    assert cells[1]["source"][:3] == ["%timeit torch.relu(x.to(device))\n", "%time y = x.to(device)\n",
                                      "%timeit -n 10 x.cuda()\n"]
    assert cells[1]["source"][4] == "    %time z = x + i\n"
    # nothing to fix: the notebook's bytes do not change (trailing blanks of a timed line included)
    clean = [code(["import torch\n", "x = torch.ones(4)\n"]), code(["%time y = x + 1  \n", "print(y)"])]
    raw = write_nb(path, notebook(clean))
    run(["check", "--fix", "t.ipynb"], tmp_path, monkeypatch)
    assert path.read_bytes() == raw
