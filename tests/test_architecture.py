"""The layering the design card promises: no import cycle among devlint's modules (the
rules included), counting imports inside functions too (a lazy import is still a cycle
for whoever reads the code); only ``if TYPE_CHECKING:`` blocks are left out."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"devlint": ROOT / "devlint", "devlint.rules": ROOT / "rules"}


def modules() -> dict[str, Path]:
    found = {}
    for prefix, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("").parts
            name = ".".join((prefix, *rel))
            found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, name: str, known: dict) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")[: -node.level] if path.name != "__init__.py" else \
                    name.split(".")[: len(name.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in out if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_under_devlint():
    known = modules()
    assert "devlint.engine" in known and "devlint.rules.dl001_unassigned_transfer" in known
    graph = {name: imports(path, name, known) for name, path in known.items()}
    assert cycles(graph) == []


def test_rules_do_not_import_the_engine_or_the_cli():
    """Rules read the per-file model (devlint.facts, devlint.analysis); the pipeline that
    runs them sits above them."""
    known = modules()
    above = {"devlint.engine", "devlint.runner", "devlint.cli", "devlint.server", "devlint.output"}
    for name, path in known.items():
        if name.startswith("devlint.rules."):
            assert not imports(path, name, known) & above, name


def test_the_model_answers_questions_and_never_builds_fixes():
    """The arrow runs from the fixes to the model: nothing under devlint/analysis (nor the
    project index) imports the fix machinery or builds a Fix."""
    known = modules()
    fixing = {"devlint.fixes", "devlint.callargs", "devlint.engine"}
    for name, path in known.items():
        if name.startswith("devlint.analysis") or name == "devlint.project":
            assert not imports(path, name, known) & fixing, name
            assert "Fix(" not in path.read_text(encoding="utf-8"), name


def test_linting_leaves_no_reference_cycle_holding_the_tree():
    """A file's tree is freed when its lint ends, not later by the cycle collector: no rule,
    model or traversal closure may tie itself into a cycle with the facts (that cost a fifth
    of a run). Every rule runs, on files with findings and fixes, and through the fixer."""
    import gc

    import libcst as cst

    from devlint.engine import fix_source, lint_source
    from devlint.settings import Settings
    from devlint import registry

    settings = Settings(select=frozenset(r.code for r in registry.all_rules()), unsafe_fixes=True)
    sources = [(ROOT / "examples" / "legacy_gpu_train.py").read_bytes()]
    sources += [p.read_bytes() for p in sorted((ROOT / "tests" / "fixtures").glob("DL0*/*/before.py"))[:12]]
    lint_source(sources[0], "warm.py", settings)  # first-use caches are not garbage
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        found = 0
        for i, src in enumerate(sources):
            res = lint_source(src, f"f{i}.py", settings)
            found += len(res.diagnostics)
            del res
            fix_source(src, f"f{i}.py", settings)
        gc.collect()
        kept = [o for o in gc.garbage if isinstance(o, cst.CSTNode)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert found > 10  # files with findings and fixes, not only clean ones
    assert kept == [], f"{len(kept)} tree nodes were only freed by the cycle collector"
