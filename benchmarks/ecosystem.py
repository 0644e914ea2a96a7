#!/usr/bin/env python
"""The ecosystem check: devlint's default rules judged on 40 real repositories (issue 24).

    python benchmarks/ecosystem/extract.py SRC_DIR            # once: the corpus, outside the repo
    python benchmarks/ecosystem.py SRC_DIR                      # lint, score against the labels
    python benchmarks/ecosystem.py SRC_DIR --save run.json      # ... and keep this run's findings
    python benchmarks/ecosystem.py SRC_DIR --diff run.json      # what appeared / vanished since
    python benchmarks/ecosystem.py SRC_DIR --set tune --unlabelled todo.jsonl   # what to label next
    python benchmarks/ecosystem.py SRC_DIR --set tune --sample-misses miss.jsonl  # recall sample

Every repository of ``benchmarks/ecosystem/repos.toml`` is linted as a new user would lint it
(``devlint check --isolated --no-cache``: default rules, no configuration) from its own root.
Each finding is matched to ``benchmarks/ecosystem/labels.jsonl`` by repository, path, notebook
cell, rule, line and a short hash of the stripped source line (so a drifted checkout or a moved
line is caught, not mislabelled, and a second line with the same text is judged on its own). Per rule and per set it prints
findings, labelled true, labelled false, unlabelled, precision (true / labelled findings) and
recall (true findings / (true findings + labelled bugs devlint does not report, each missed
sample line counted with the weight of its sampling stratum)), then lines per second and any
crash, or DL000 on a file that Python compiles. Labels are facts about lines, see
``benchmarks/ecosystem/LABELING.md``; the corpus's source never enters this repository.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ECO = os.path.join(HERE, "ecosystem")
sys.path.insert(0, ECO)
from extract import STAMP, load_manifest, slug  # noqa: E402

LABELS = os.path.join(ECO, "labels.jsonl")
CORE = ("DL001", "DL002", "DL003", "DL004")
SAMPLE_CAP = 40  # findings of one rule in one repository labelled at most (a seeded sample)
SEED = 20261125

# Lines a reviewer would look at for each rule, whether devlint reports them or not: the
# population the recall sample is drawn from (the grep list).
CANDIDATES = {
    "DL001": re.compile(r"^\s*[\w.\[\]'\"]+\.(to|cuda|cpu|half|float|double)\([^=]*\)\s*(#.*)?$"),
    "DL002": re.compile(r"\.cuda\(|[\"']cuda(:\d+)?[\"']"),
    "DL003": re.compile(r"\.(item|cpu|numpy|tolist)\(\)"),
    "DL004": re.compile(r"torch\.cuda\.(?!is_available|device_count|manual_seed|empty_cache|amp|memory_allocated|"
                        r"max_memory_allocated)\w+|\.pin_memory\(\)"),
    "DL005": re.compile(r"torch\.(jit\.)?load\("),
    "DL007": re.compile(r"torch\.(zeros|ones|empty|full|rand|randn|randint|arange|eye|linspace|tensor|"
                        r"FloatTensor|LongTensor)\w*\(.*\)\.(to|cuda)\("),
}
IN_LOOP_RULES = ("DL003",)  # candidates only inside a `for`/`while` body (by indentation)
ALSO = re.compile(r"(?:\(also |; )(DL\d{3}): ")  # the codes a merged finding stands for too


def line_hash(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8", "surrogateescape")).hexdigest()[:8]


# --- sources -------------------------------------------------------------------------------

def notebook_cells(path: str) -> dict[int, list[str]]:
    """Cell number (from 1, every cell counted, as devlint reports it) -> code lines."""
    try:
        with open(path, encoding="utf-8") as f:
            nb = json.load(f)
    except (OSError, ValueError):
        return {}
    cells = {}
    for i, cell in enumerate(nb.get("cells", []) if isinstance(nb, dict) else [], start=1):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            src = cell.get("source", "")
            src = "".join(src) if isinstance(src, list) else str(src)
            cells[i] = src.splitlines()
    return cells


class Sources:
    """Source lines of one repository's files, read once."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._cache: dict = {}

    def lines(self, path: str, cell: int | None) -> list[str]:
        key = (path, cell)
        if key not in self._cache:
            full = os.path.join(self.root, path)
            if path.endswith(".ipynb"):
                for c, ls in notebook_cells(full).items():
                    self._cache[(path, c)] = ls
                self._cache.setdefault(key, [])
            else:
                try:
                    with open(full, encoding="utf-8", errors="surrogateescape") as f:
                        self._cache[key] = f.read().splitlines()
                except OSError:
                    self._cache[key] = []
        return self._cache[key]

    def line(self, path: str, cell: int | None, line: int) -> str:
        ls = self.lines(path, cell)
        return ls[line - 1] if 0 < line <= len(ls) else ""


def source_files(root: str):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith((".py", ".ipynb")):
                yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def ignored_files(root: str) -> list[str]:
    """Source files of ``root`` that devlint's discovery skips because the repository's own
    ``.gitignore`` excludes them (a tracked file under an ignore pattern, as ruff skips it too):
    a labelled bug there is no miss of a rule, and the recall sample leaves them out."""
    from devlint.config import PathFilter
    pf = PathFilter(root)
    return [rel for rel in source_files(root) if pf.excluded(os.path.join(root, rel), ancestors=True)]


# the sets of repos.toml, in report order: tuned on, measured once after tuning, the held-out
# set chosen after `check` had been read, and the ones chosen after `fresh`, `fresh2` and `fresh3`
# had been (docs/ecosystem.md)
SETS = ("tune", "check", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9", "fresh10", "fresh11", "fresh12", "fresh13", "fresh14", "fresh15", "fresh16", "fresh17", "fresh18", "fresh19", "fresh20", "fresh21", "fresh22", "fresh23")


# --- linting -------------------------------------------------------------------------------

def lint_repo(root: str, jobs: int) -> tuple[list[dict], list[str], float]:
    # the repository's top is the project root, as a checkout's .git would make it (extracted
    # trees carry no VCS marker)
    cmd = [sys.executable, "-m", "devlint", "check", "--isolated", "--no-cache", "--output-format", "json",
           "--exit-zero", "-q", "-j", str(jobs), "--project-root", ".", "."]
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    wall = time.perf_counter() - t
    try:
        findings = json.loads(p.stdout or "[]")
    except ValueError:
        findings = []
    errors = [ln for ln in p.stderr.splitlines() if ln.strip()]
    # exit 2 is devlint's answer to bad input (a notebook that is not JSON, say): it names the file,
    # lints the rest, and is no crash when the benchmark sees for itself that the file is unreadable
    if p.returncode not in (0, 1) and not (p.returncode == 2 and errors and all(bad_input(root, e) for e in errors)):
        errors.append(f"devlint exited {p.returncode}")
    return findings, errors, wall


_INPUT_ERROR = re.compile(r"^devlint: error: (?P<path>.+?\.ipynb): not a valid notebook\b")


def bad_input(root: str, line: str) -> bool:
    """``devlint: error: nb.ipynb: not a valid notebook (...)`` for a file that is indeed no JSON
    notebook (merge-conflict markers, a truncated download): the input's fault, not devlint's."""
    m = _INPUT_ERROR.match(line)
    if not m:
        return False
    try:
        with open(os.path.join(root, m.group("path")), encoding="utf-8") as f:
            nb = json.load(f)
        return not isinstance(nb, dict) or not isinstance(nb.get("cells"), list)
    except (OSError, ValueError):
        return True


def compiles(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            compile(f.read(), path, "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError, OSError):
        return False


def count_lines(root: str) -> int:
    n = 0
    for rel in source_files(root):
        full = os.path.join(root, rel)
        if rel.endswith(".ipynb"):
            n += sum(len(ls) for ls in notebook_cells(full).values())
        else:
            try:
                with open(full, "rb") as f:
                    n += f.read().count(b"\n")
            except OSError:
                pass
    return n


# --- labels --------------------------------------------------------------------------------

def load_labels(path: str) -> list[dict]:
    labels = []
    if not os.path.exists(path):
        return labels
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            raw = raw.strip()
            if raw:
                try:
                    labels.append(json.loads(raw))
                except ValueError as e:
                    sys.exit(f"{path}:{n}: not a JSON record ({e})")
    return labels


def label_key(repo: str, path: str, cell, rule: str, h: str) -> tuple:
    return (repo, path, cell, rule, h)


class LabelIndex:
    def __init__(self, labels: list[dict]) -> None:
        self.by_key: dict[tuple, list[dict]] = collections.defaultdict(list)
        for lab in labels:
            self.by_key[label_key(lab["repo"], lab["path"], lab.get("cell"), lab["rule"], lab["hash"])].append(lab)

    def find(self, repo, path, cell, rule, h, line) -> dict | None:
        """The label of this very line. A line with the same text elsewhere in the file (a second
        ``device='cuda',`` in another dict of a config) is another line, judged on its own: it
        never borrows that label (the commits are pinned, so a labelled line does not move)."""
        for lab in self.by_key.get(label_key(repo, path, cell, rule, h), ()):
            if lab["line"] == line:
                return lab
        return None


# --- the run -------------------------------------------------------------------------------

def run(src: str, repos: list[dict], jobs: int) -> dict:
    out = {"findings": [], "errors": [], "dl000_compiling": [], "lines": 0, "seconds": 0.0, "repos": {}}
    for repo in repos:
        root = os.path.join(src, slug(repo["name"]))
        if not os.path.isdir(root):
            out["errors"].append(f"{repo['name']}: not extracted under {src}")
            continue
        stamp = os.path.join(root, STAMP)
        if os.path.isfile(stamp) and open(stamp).read().strip() != repo["commit"]:
            out["errors"].append(f"{repo['name']}: extracted at another commit than repos.toml pins")
        findings, errors, wall = lint_repo(root, jobs)
        lines = count_lines(root)
        out["lines"] += lines
        out["seconds"] += wall
        out["repos"][repo["name"]] = {"findings": len(findings), "lines": lines, "seconds": round(wall, 3),
                                      "ignored": ignored_files(root)}
        out["errors"] += [f"{repo['name']}: {e}" for e in errors]
        srcs = Sources(root)
        for d in findings:
            cell = d.get("cell")
            text = srcs.line(d["filename"], cell, d["line"])
            rec = {"repo": repo["name"], "set": repo["set"], "commit": repo["commit"], "path": d["filename"],
                   "cell": cell, "line": d["line"], "end_line": d.get("end_line", d["line"]), "column": d["column"],
                   "rule": d["code"],
                   "hash": line_hash(text), "message": d["message"], "text": text.strip(),
                   "fix": (d.get("fix") or {}).get("applicability")}
            out["findings"].append(rec)
            if d["code"] == "DL000" and not d["filename"].endswith(".ipynb") \
                    and compiles(os.path.join(root, d["filename"])):
                out["dl000_compiling"].append(f"{repo['name']}: {d['filename']}: {d['message']}")
    return out


def default_rules() -> frozenset:
    """The codes devlint runs by default (the check lints with them): a labelled bug of a rule
    that is off by default (DL008, DL010) is no miss of the default rules."""
    from devlint import registry
    return registry.resolve()


def score(run_: dict, labels: list[dict], repos: list[dict]) -> dict:
    """Per (set, rule): findings, true, false, unlabelled, unsampled, missed (weighted)."""
    defaults = default_rules()
    index = LabelIndex(labels)
    sets = {r["name"]: r["set"] for r in repos}
    table: dict = collections.defaultdict(lambda: collections.Counter())
    reported = set()
    group = collections.Counter((f["repo"], f["rule"]) for f in run_["findings"])
    labelled_in_group = collections.Counter()
    for f in run_["findings"]:
        if f["rule"] == "DL000":  # a file that does not parse: listed apart, never labelled
            f["label"] = None
            continue
        lab = index.find(f["repo"], f["path"], f["cell"], f["rule"], f["hash"], f["line"])
        row = table[(f["set"], f["rule"])]
        row["findings"] += 1
        if lab is None:
            f["label"] = None
            continue
        reported.add(id(lab))
        labelled_in_group[(f["repo"], f["rule"])] += 1
        f["label"] = lab["bug"]
        row["true" if lab["bug"] else "false"] += 1
    for f in run_["findings"]:
        if f["label"] is None and f["rule"] != "DL000":
            key = (f["repo"], f["rule"])
            sampled = group[key] > SAMPLE_CAP and labelled_in_group[key] >= SAMPLE_CAP
            table[(f["set"], f["rule"])]["unsampled" if sampled else "unlabelled"] += 1
    linted = {f["repo"] for f in run_["findings"]} | set(run_["repos"])
    unparsed = {(f["repo"], f["path"]) for f in run_["findings"] if f["rule"] == "DL000"}
    spans = collections.defaultdict(list)  # a statement over several lines is reported once
    for f in run_["findings"]:
        # `torch.zeros(3).cuda()` is one DL007 finding "(also DL002: ...)": the line a DL002
        # label names is reported, under the code that subsumes it (devlint.engine.SUBSUMES)
        for code in (f["rule"], *ALSO.findall(f.get("message", ""))):
            spans[(f["repo"], f["path"], f["cell"], code)].append((f["line"], f.get("end_line", f["line"])))
    ignored = {(name, rel) for name, r in run_["repos"].items() for rel in r.get("ignored", ())}
    for lab in labels:
        if id(lab) in reported or not lab["bug"] or lab["repo"] not in linted or lab["repo"] not in sets:
            continue
        if lab["rule"] not in defaults:
            continue
        if (lab["repo"], lab["path"]) in unparsed:  # Python 3 cannot compile it either
            continue
        if (lab["repo"], lab["path"]) in ignored:  # the repository's .gitignore keeps devlint out of it
            table[(sets[lab["repo"]], lab["rule"])]["ignored_lines"] += 1
            continue
        if any(a <= lab["line"] <= b for a, b in spans[(lab["repo"], lab["path"], lab.get("cell"), lab["rule"])]):
            continue
        row = table[(sets[lab["repo"]], lab["rule"])]
        row["missed"] += float(lab.get("weight", 1.0))
        row["missed_lines"] += 1
    return table


def fmt_ratio(num: float, den: float) -> str:
    return f"{num / den:.2f}" if den else "  - "


def print_table(table: dict, out=sys.stdout) -> None:
    rules = sorted({rule for _, rule in table})
    for set_name in SETS:
        rows = {rule: table[(set_name, rule)] for rule in rules if (set_name, rule) in table}
        if not rows:
            continue
        print(f"\n{set_name} set", file=out)
        print(f"  {'rule':6} {'findings':>8} {'true':>5} {'false':>5} {'unlab.':>6} {'unsamp.':>7} "
              f"{'missed':>7} {'precision':>9} {'recall':>6}", file=out)
        tot = collections.Counter()
        core = collections.Counter()
        for rule, row in rows.items():
            tot.update(row)
            if rule in CORE:
                core.update(row)
            print(_row(rule, row), file=out)
        print(_row("all", tot), file=out)
        print(_row("core", core) + "   (DL001-DL004)", file=out)
        if tot["ignored_lines"]:
            print(f"  ({tot['ignored_lines']} labelled bug lines sit in files the repository's .gitignore "
                  "excludes: devlint does not lint them, they count as no miss)", file=out)


def _row(name: str, row) -> str:
    t, f, m = row["true"], row["false"], row["missed"]
    return (f"  {name:6} {row['findings']:>8} {t:>5} {f:>5} {row['unlabelled']:>6} {row['unsampled']:>7} "
            f"{m:>7.1f} {fmt_ratio(t, t + f):>9} {fmt_ratio(t, t + m):>6}")


# --- label work lists ----------------------------------------------------------------------

def unlabelled_records(run_: dict, labels: list[dict]) -> list[dict]:
    """Findings still to label: every one, except a seeded sample of SAMPLE_CAP where one
    repository has more than that of one rule (already labelled ones count toward it)."""
    index = LabelIndex(labels)
    groups = collections.defaultdict(list)
    for f in run_["findings"]:
        if f["rule"] != "DL000":
            groups[(f["repo"], f["rule"])].append(f)
    todo = []
    for key in sorted(groups):
        fs = groups[key]
        done = [f for f in fs if index.find(f["repo"], f["path"], f["cell"], f["rule"], f["hash"], f["line"])]
        rest = [f for f in fs if f not in done]
        if len(fs) > SAMPLE_CAP:
            rest = sorted(rest, key=lambda f: (f["path"], f["cell"] or 0, f["line"]))
            random.Random(f"{SEED}:{key[0]}:{key[1]}").shuffle(rest)
            rest = rest[: max(0, SAMPLE_CAP - len(done))]
        for f in rest:
            todo.append(template(f, "finding", 1.0, f["message"]))
    return todo


def template(f: dict, source: str, weight: float, note: str) -> dict:
    return {"repo": f["repo"], "commit": f["commit"], "path": f["path"], "cell": f["cell"], "line": f["line"],
            "hash": f["hash"], "rule": f["rule"], "bug": None, "confidence": None, "why": "",
            "source": source, "weight": weight, "text": f["text"], "devlint": note}


def in_loop(lines: list[str], i: int) -> bool:
    """Is line i (0-based) inside a for/while body, by indentation?"""
    indent = len(lines[i]) - len(lines[i].lstrip())
    for j in range(i - 1, -1, -1):
        s = lines[j]
        if not s.strip() or s.lstrip().startswith("#"):
            continue
        ind = len(s) - len(s.lstrip())
        if ind < indent:
            if re.match(r"\s*(async\s+)?(for|while)\b", s):
                return True
            if re.match(r"\s*(def|class)\b", s):
                return False
            indent = ind
    return False


def miss_sample(src: str, repos: list[dict], run_: dict, per_stratum: int) -> list[dict]:
    """A seeded sample of candidate lines devlint does not report, per (repository, rule)
    stratum, each with the weight population / sampled so recall can be estimated."""
    reported = {(f["repo"], f["path"], f["cell"], ln) for f in run_["findings"]
                for ln in range(f["line"], f.get("end_line", f["line"]) + 1)}
    unparsed = {(f["repo"], f["path"]) for f in run_["findings"] if f["rule"] == "DL000"}
    out = []
    for repo in repos:
        root = os.path.join(src, slug(repo["name"]))
        srcs = Sources(root)
        strata = collections.defaultdict(list)
        skipped = set(run_["repos"].get(repo["name"], {}).get("ignored", ()))
        for rel in source_files(root):
            if (repo["name"], rel) in unparsed or rel in skipped:
                continue
            cells = sorted(notebook_cells(os.path.join(root, rel))) if rel.endswith(".ipynb") else [None]
            for cell in cells:
                lines = srcs.lines(rel, cell)
                for i, text in enumerate(lines):
                    if text.lstrip().startswith("#") or (repo["name"], rel, cell, i + 1) in reported:
                        continue
                    for rule, pat in CANDIDATES.items():
                        if pat.search(text) and (rule not in IN_LOOP_RULES or in_loop(lines, i)):
                            strata[rule].append((rel, cell, i + 1, text))
        for rule in sorted(strata):
            pop = strata[rule]
            pick = list(pop)
            random.Random(f"{SEED}:miss:{repo['name']}:{rule}").shuffle(pick)
            pick = sorted(pick[:per_stratum], key=lambda x: (x[0], x[1] or 0, x[2]))
            weight = round(len(pop) / len(pick), 3)
            for rel, cell, line, text in pick:
                f = {"repo": repo["name"], "commit": repo["commit"], "path": rel, "cell": cell, "line": line,
                     "hash": line_hash(text), "rule": rule, "text": text.strip()}
                out.append(template(f, "sample", weight, f"not reported; {len(pop)} candidate lines in stratum"))
    return out


# --- diff ----------------------------------------------------------------------------------

def finding_key(f: dict) -> tuple:
    return (f["repo"], f["path"], f["cell"], f["rule"], f["hash"])


def print_diff(old: dict, new: dict, out=sys.stdout) -> None:
    def multiset(fs):
        c = collections.defaultdict(list)
        for f in fs:
            c[finding_key(f)].append(f)
        return c

    o, n = multiset(old["findings"]), multiset(new["findings"])
    appeared, vanished = [], []
    for k in set(o) | set(n):
        a, b = o.get(k, []), n.get(k, [])
        if len(b) > len(a):
            appeared += b[len(a):]
        elif len(a) > len(b):
            vanished += a[len(b):]

    def show(title, fs):
        print(f"\n{title}: {len(fs)}", file=out)
        for f in sorted(fs, key=lambda f: (f["repo"], f["path"], f["cell"] or 0, f["line"], f["rule"])):
            lab = {True: "labelled bug", False: "labelled false alarm", None: "unlabelled"}[f.get("label")]
            cell = f":cell {f['cell']}" if f["cell"] else ""
            print(f"  {f['rule']} {f['repo']} {f['path']}{cell}:{f['line']}  [{lab}]  {f['text'][:90]}", file=out)

    show("appeared", appeared)
    show("vanished", vanished)
    by_rule = collections.Counter(f["rule"] for f in appeared)
    by_rule.subtract(collections.Counter(f["rule"] for f in vanished))
    print("\nnet per rule: " + ", ".join(f"{r} {v:+d}" for r, v in sorted(by_rule.items()) if v) or "none", file=out)


# --- main ----------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="the directory extract.py wrote the corpus into")
    ap.add_argument("--set", choices=(*SETS, "all"), default="all")
    ap.add_argument("--repo", action="append", help="only this repository (owner/name; repeatable)")
    ap.add_argument("--labels", default=LABELS)
    ap.add_argument("--manifest", default=None, help="another repos.toml (default: benchmarks/ecosystem/repos.toml)")
    ap.add_argument("--jobs", "-j", type=int, default=0, help="devlint worker processes (0: one per CPU)")
    ap.add_argument("--save", metavar="RUN.json", help="write this run's findings")
    ap.add_argument("--diff", metavar="OLD.json", help="print findings that appeared / vanished since OLD")
    ap.add_argument("--unlabelled", metavar="OUT.jsonl", help="write label templates for unlabelled findings")
    ap.add_argument("--sample-misses", metavar="OUT.jsonl", help="write a seeded sample of unreported lines")
    ap.add_argument("--per-stratum", type=int, default=6, help="sampled lines per repository and rule")
    args = ap.parse_args(argv)

    manifest = load_manifest(args.manifest) if args.manifest else load_manifest()
    repos = [r for r in manifest if args.set in ("all", r["set"])]
    if args.repo:
        repos = [r for r in repos if r["name"] in args.repo]
    if not os.path.isdir(args.src):
        print(f"ecosystem.py: {args.src}: no such directory (run benchmarks/ecosystem/extract.py first)",
              file=sys.stderr)
        return 2
    labels = load_labels(args.labels)
    result = run(args.src, repos, args.jobs)
    table = score(result, labels, manifest)
    print(f"{len(repos)} repositories, {len(result['findings'])} findings, {len(labels)} labels")
    print_table(table)
    lps = result["lines"] / result["seconds"] if result["seconds"] else 0.0
    print(f"\n{result['lines']} lines in {result['seconds']:.1f} s: {lps:,.0f} lines/s (devlint, one process per repository)")
    crashes = [e for e in result["errors"] if "internal error" in e or "Traceback" in e or "exited" in e]
    bad = [e for e in result["errors"] if "devlint: error:" in e and e not in crashes]
    print(f"crashes: {len(crashes)}; DL000 on a file Python compiles: {len(result['dl000_compiling'])}; "
          f"input files that are not valid (named, the rest linted): {len(bad)}")
    for line in crashes + result["dl000_compiling"] + [e for e in result["errors"] if e not in crashes]:
        print(f"  {line}")
    if args.diff:
        with open(args.diff, encoding="utf-8") as f:
            old = json.load(f)
        print_diff(old, result)
    if args.save:
        with open(args.save, "w", encoding="utf-8") as f:
            json.dump({k: v for k, v in result.items()}, f, indent=1)
    for path, records in ((args.unlabelled, lambda: unlabelled_records(result, labels)),
                          (args.sample_misses, lambda: miss_sample(args.src, repos, result, args.per_stratum))):
        if path:
            recs = records()
            with open(path, "w", encoding="utf-8") as f:
                for r in recs:
                    f.write(json.dumps(r) + "\n")
            print(f"wrote {len(recs)} records to {path}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
