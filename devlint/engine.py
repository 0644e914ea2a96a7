"""The pipeline for one file: bytes -> prefilter -> one parse -> facts -> all rules in one
traversal -> diagnostics, and the fix loop (replace nodes, re-lint until stable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from devlint import lazyre
from devlint import registry
from devlint.catalogue import cpython_parses, prefiltered
from devlint.diagnostic import Diagnostic
from devlint.context import FileContext
from devlint.facts import module_stop, prescan
from devlint.fixes import apply_fixes
from devlint.rule import Report, Rule
from devlint.settings import Settings, applicable  # noqa: F401 - re-exported
from devlint.suppression import suppress
from devlint.walk import positions as node_positions, visit_batched

MAX_FIX_ROUNDS = 10


class ParseError(Rule):
    """
    ## What it does
    Reports a file devlint cannot parse: a syntax error, bytes that do not decode in the
    file's encoding (UTF-8 unless a coding cookie says otherwise), a NUL byte, or nesting
    too deep for Python's own parser. The message is CPython's own where it has one
    (`'(' was never closed`).

    ## Why is this bad?
    A file that cannot be parsed cannot be checked, so "All checks passed." would be a
    lie; Python cannot import it either. It is reported whatever the file contains (with
    or without torch code) and whatever rules are selected, and exits 1.

    ## Example
    ```python
    def train(model:
        model.cuda()
    ```

    ## Use instead
    ```python
    def train(model):
        model.cuda()
    ```

    ## Fix safety
    No fix. A `# noqa` comment cannot hide it (the comment is in a file that does not
    parse); files that are not Python on purpose (templates) are excluded
    (`extend-exclude`) or ignored with `--ignore DL000` / `per-file-ignores`.
    """

    code = "DL000"
    # name and summary: devlint/catalogue.py (PARSE_ERROR_INFO); never run as a rule


class LintError(Exception):
    """A file that could not be linted (unreadable, undecodable, unparsable)."""


@dataclass
class FileResult:
    filename: str
    diagnostics: list[Diagnostic]
    module: Optional[cst.Module] = None
    context: Optional[FileContext] = None
    reports: list = field(default_factory=list)
    parse_failed: bool = False  # the file does not parse (DL000, reported or not)


def _parse_error(filename: str, exc: Exception, source: bytes = b"") -> Diagnostic:
    line, col = 1, 1
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, cst.ParserSyntaxError):
        line, col = exc.editor_line, exc.editor_column
        msg = exc.message
    elif isinstance(exc, RecursionError):
        msg = "too deeply nested to parse"
    elif isinstance(exc, UnicodeDecodeError):
        msg = f"cannot decode as {exc.encoding}: {exc.reason} at byte {exc.start}"
        if isinstance(exc.object, bytes) and exc.object == source:
            line, col = _line_col(source, exc.start)
    if b"\0" in source:
        line, col = _line_col(source, source.index(b"\0"))
        msg = "the file contains a NUL byte"
    elif not isinstance(exc, (UnicodeDecodeError, RecursionError)):
        py = python_syntax_error(source)
        if py is not None:  # CPython's message is the one users know ("'(' was never closed")
            msg, line, col = py
    return Diagnostic("DL000", registry.PARSE_ERROR[1], f"cannot parse: {msg}", filename,
                      line, col, line, col, None)


def _line_col(source: bytes, offset: int) -> tuple[int, int]:
    start = source.rfind(b"\n", 0, offset) + 1
    return source.count(b"\n", 0, offset) + 1, offset - start + 1


def python_syntax_error(source: bytes) -> Optional[tuple[str, int, int]]:
    """CPython's own verdict on ``source``: ``(message, line, column)`` when it does not
    compile, None when it does (or when CPython cannot say). Compiles only: nothing is
    executed."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "<devlint>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        if type(exc) is not SyntaxError and type(exc).__name__ not in msg:
            msg = f"{type(exc).__name__}: {msg}"
        return msg, exc.lineno or 1, exc.offset or 1
    except (ValueError, RecursionError, MemoryError):  # NUL bytes, too deep, too big
        return None
    return None


def _unchecked(self) -> None:
    """A node built by the parser from source it has just accepted: nothing to validate."""


def parse(source: bytes) -> cst.Module:
    """``libcst.parse_module`` without LibCST's per-node validation (``CSTNode.__post_init__``
    calls ``_validate`` on every node it builds). That validation guards nodes built by hand,
    which fixes still get; a tree the parser builds from source it accepted needs none (LibCST's
    own PERF note says as much), and skipping it saves about a sixth of the parse. The swap is
    undone before anything else runs (devlint parses on one thread at a time)."""
    node_class = cst.CSTNode
    validating = node_class.__post_init__
    node_class.__post_init__ = _unchecked
    try:
        return cst.parse_module(source)
    finally:
        node_class.__post_init__ = validating


# Runs of nested brackets, unary operators or attribute chains far beyond what CPython
# accepts (it stops at 200 nested brackets): LibCST's parser can hang or crash on them,
# so such a file is first put to CPython's compiler, which refuses it in microseconds.
# Every alternative starts on one punctuation character and bounds its inner runs, so the
# scan stays linear (an unbounded `[\w.]*` prefix took minutes on a 200 kB identifier).
_PATHOLOGICAL = lazyre.compile(rb"(?:[(\[{][^()\[\]{}\n]{0,12}){150,}|[-+~]{150,}|(?:\.\w{1,40}(?:\(\))?){400,}")


_PATHOLOGICAL_MIN_LINE = 150  # every alternative above spans at least this much of one line


def _refused_by_cpython(source: bytes) -> Optional[str]:
    # nearly no file has a line that long: the length check is ~60x cheaper than the scan
    if max(map(len, source.split(b"\n")), default=0) < _PATHOLOGICAL_MIN_LINE:
        return None
    if _PATHOLOGICAL.search(source) is None:
        return None
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "<devlint>", "exec", dont_inherit=True, flags=0x400)  # PyCF_ONLY_AST
    except SyntaxError as exc:
        return exc.msg or "invalid syntax"
    except (RecursionError, MemoryError):
        return "too deeply nested to parse"
    except ValueError:
        return None
    return None


def lint_source(source: bytes, filename: str, settings: Settings) -> FileResult:
    res = _lint_source(source, filename, settings)
    if res.parse_failed and not settings.parse_errors:  # `--ignore DL000`
        res.diagnostics = [d for d in res.diagnostics if d.code != "DL000"]
    return res


def _lint_source(source: bytes, filename: str, settings: Settings) -> FileResult:
    rules = prefiltered(settings.rules(), source)
    if not rules:
        # nothing to lint, but a file that does not parse is still DL000. CPython's parser
        # clears nearly every file without importing LibCST; what it refuses goes to LibCST,
        # the parser of every other file, which also knows grammar newer than the running
        # Python (3.12's `def f[T]()` on 3.11): only what LibCST refuses too is DL000.
        if settings.parse_errors and not cpython_parses(source):
            _module, error = _parse(source, filename)
            if error is not None:
                return FileResult(filename, [error], parse_failed=True)
        return FileResult(filename, suppress(source, filename, [], [], settings)[0])
    module, error = _parse(source, filename)
    if error is not None:
        return FileResult(filename, [error], parse_failed=True)
    return lint_module(module, source, filename, settings, rules)


def _parse(source: bytes, filename: str) -> tuple[Optional[cst.Module], Optional[Diagnostic]]:
    refused = _refused_by_cpython(source)
    if refused is not None:
        return None, Diagnostic("DL000", registry.PARSE_ERROR[1], f"cannot parse: {refused}",
                                filename, 1, 1, 1, 1, None)
    try:
        return parse(source), None
    except (cst.ParserSyntaxError, RecursionError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        return None, _parse_error(filename, exc, source)


def lint_module(module: cst.Module, source: bytes, filename: str, settings: Settings,
                rules=None) -> FileResult:
    rules = settings.rules() if rules is None else rules
    facts = prescan(module, source, settings.project)
    ctx = FileContext(module, facts, settings, filename)
    instances = [r(ctx) for r in rules]
    visit_batched(module, [ctx.tracker, *instances, ctx.tracker.closer])
    for inst in instances:
        inst.finish()
    diags: list[Diagnostic] = []
    if ctx.reports:
        # positions cost a code generation: only for files with findings, only reported nodes
        stop = module_stop(module) if not filename.endswith(".ipynb") else None
        positions = node_positions(module, [rep.node for rep in ctx.reports] + ([stop] if stop else []), source)
        if stop is not None:  # what follows `assert False` / `raise` / `sys.exit()` at the top never runs
            end = positions[stop].end.line
            ctx.reports = [rep for rep in ctx.reports if positions[rep.node].start.line <= end]
        for rep in ctx.reports:
            rng = positions[rep.node]
            diags.append(Diagnostic(rep.rule.code, rep.rule.name, rep.message, filename,
                                    rng.start.line, rng.start.column + 1, rng.end.line,
                                    rng.end.column + 1, rep.fix))
        if len(diags) > 1:
            diags, ctx.reports = merge_overlaps(diags, ctx.reports)
    order = sorted(range(len(diags)), key=lambda i: diags[i].sort_key())
    diags = [diags[i] for i in order]
    reports = [ctx.reports[i] for i in order]
    diags, reports = suppress(source, filename, diags, reports, settings)  # noqa, baseline, DL100
    return FileResult(filename, diags, module, ctx, reports)


# One expression, one finding. When rules report the same expression (or nested parts of
# it), the finding of the code on the left stands for those of the codes on the right:
# its message names them, a `# noqa` naming any of them suppresses it, and its fix is the
# one applied (what it leaves of the others is found again, and fixed, by the next round
# of the fix loop). Listed in order: the first code that applies keeps the finding.
SUBSUMES: tuple[tuple[str, frozenset], ...] = (
    # a discarded conversion statement does nothing at all: that is the bug to fix first
    # (`y.cuda()` -> `y = y.cuda()`; the hard-coded device is then DL002's next round)
    ("DL001", frozenset({"DL002", "DL003", "DL007", "DL008"})),
    # `torch.zeros(3).cuda()`: allocating on the device also removes the hard-coded move
    # (the fix routes `device=` through the device variable) and the per-iteration copy
    ("DL007", frozenset({"DL002", "DL003", "DL006"})),
    # `x.cuda()` in a loop: hoisting is the specific advice; the device is fixed after
    ("DL003", frozenset({"DL002", "DL008"})),
)


def merge_overlaps(diags: list[Diagnostic], reports: list) -> tuple[list[Diagnostic], list]:
    """Fold findings on one expression into the one of the code that subsumes the others
    (:data:`SUBSUMES`). ``diags`` and ``reports`` are parallel lists."""
    codes = {d.code for d in diags}
    if not any(code in codes and subs & codes for code, subs in SUBSUMES):
        return diags, reports
    absorbed: set[int] = set()
    by_line: dict[int, list[int]] = {}
    for j, o in enumerate(diags):
        by_line.setdefault(o.line, []).append(j)
    for code, subs in SUBSUMES:
        for i, d in enumerate(diags):
            if d.code != code or i in absorbed:
                continue
            near = (j for line in range(d.line, d.end_line + 1) for j in by_line.get(line, ()))
            taken = [j for j in near if j != i and j not in absorbed and diags[j].code in subs
                     and _same_expression(d, reports[i].node, diags[j], reports[j].node)]
            if not taken:
                continue
            absorbed.update(taken)
            parts = [diags[j] for j in sorted(taken, key=lambda j: diags[j].code)]
            also = tuple(dict.fromkeys(c for p in parts for c in p.codes))
            fix = d.fix if d.fix is not None else next((p.fix for p in parts if p.fix is not None), None)
            note = "; ".join(f"{p.code}: {p.message}" for p in parts)
            diags[i] = Diagnostic(d.code, d.name, f"{d.message} (also {note})", d.filename, d.line,
                                  d.column, d.end_line, d.end_column, fix, d.cell, also=(*d.also, *also))
            if fix is not reports[i].fix:
                reports[i] = Report(reports[i].rule, reports[i].node, diags[i].message, fix)
    keep = [i for i in range(len(diags)) if i not in absorbed]
    return [diags[i] for i in keep], [reports[i] for i in keep]


def _same_expression(outer: Diagnostic, outer_node, inner: Diagnostic, inner_node) -> bool:
    """``inner`` is reported on ``outer``'s node, on a part of it that starts or ends with
    it (`torch.zeros(3)` in `torch.zeros(3).cuda()`), or on an argument of its call (`"cuda"`
    in `x.to("cuda")`) -- not on an unrelated call nested in its arguments."""
    start, end = (outer.line, outer.column), (outer.end_line, outer.end_column)
    istart, iend = (inner.line, inner.column), (inner.end_line, inner.end_column)
    if not (start <= istart and iend <= end):
        return False
    if istart == start or iend == end:
        return True
    call = getattr(outer_node, "value", outer_node)  # an `Expr` statement: its call
    if not isinstance(call, cst.Call):
        return False
    return any(a is inner_node or a.value is inner_node for a in call.args)


@dataclass
class FixOutcome:
    source: bytes  # the fixed source (== input when nothing applied)
    initial: list[Diagnostic]
    remaining: list[Diagnostic]
    fixed: int
    converged: bool = True
    problem: str = ""  # why the fixes were not kept (the source is then the input)
    fixed_codes: dict = field(default_factory=dict)  # code -> findings of it fixed


def fix_source(source: bytes, filename: str, settings: Settings) -> FixOutcome:
    """Apply fixes, re-lint and repeat until nothing changes (bounded). The result is
    kept only when every round parses, the last round changes nothing more and CPython
    still compiles the file (when it compiled before); otherwise the input comes back
    unchanged with ``problem`` set."""
    first = lint_source(source, filename, settings)
    result = first
    current = source
    for rounds in range(MAX_FIX_ROUNDS + 1):
        fixes = [d.fix for d in result.diagnostics if applicable(d.fix, settings)]
        if not fixes or result.module is None:
            break
        if rounds == MAX_FIX_ROUNDS:
            return FixOutcome(source, first.diagnostics, first.diagnostics, 0, converged=False,
                              problem=f"fixes did not converge in {MAX_FIX_ROUNDS} rounds; "
                                      "file left unchanged")
        new_module = apply_fixes(result.module, result.context.facts, fixes,
                                 result.context.new_device_name, settings.fix_style)
        new_source = new_module.bytes
        if new_source == current:
            break
        current = new_source
        result = lint_source(current, filename, settings)
        if result.parse_failed:
            # a fix must never break a file: keep the original
            return FixOutcome(source, first.diagnostics, first.diagnostics, 0, converged=False,
                              problem="a fix produced code that does not parse (a devlint bug); "
                                      "file left unchanged")
    if current != source:
        broken = python_syntax_error(current)
        if broken is not None and python_syntax_error(source) is None:
            return FixOutcome(source, first.diagnostics, first.diagnostics, 0, converged=False,
                              problem=f"a fix produced code Python cannot compile ({broken[0]}, "
                                      f"line {broken[1]}; a devlint bug); file left unchanged")
    codes = _fixed_codes(first.diagnostics, result.diagnostics, settings) if current != source else {}
    return FixOutcome(current, first.diagnostics, result.diagnostics, sum(codes.values()), fixed_codes=codes)


def _fixed_codes(before: list[Diagnostic], after: list[Diagnostic], settings: Settings) -> dict:
    """code -> findings ``--fix`` fixed: those it could fix (what the lint run counted as
    fixable) less those it could still fix afterwards. A finding a fix leaves behind in
    another form (`y.cuda(1)` -> `y = y.cuda(1)`, then an unsafe DL002) is remaining."""
    def fixable(diags) -> dict:
        out: dict = {}
        for d in diags:
            if applicable(d.fix, settings):
                out[d.code] = out.get(d.code, 0) + 1
        return out
    now = fixable(after)
    return {c: n - now.get(c, 0) for c, n in fixable(before).items() if n > now.get(c, 0)}

