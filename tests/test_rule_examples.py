"""Tests generated from each rule's VALID / INVALID examples (Fixit's convention)."""

from __future__ import annotations

import pytest

from devlint.engine import Settings, fix_source, lint_source
from devlint.registry import all_rules

VALID = [(r, i, src) for r in all_rules() for i, src in enumerate(r.VALID)]
INVALID = [(r, i, ex) for r in all_rules() for i, ex in enumerate(r.INVALID)]


@pytest.mark.parametrize("rule,i,src", VALID, ids=[f"{r.code}-valid-{i}" for r, i, _ in VALID])
def test_valid_example_is_not_flagged(rule, i, src):
    diags = lint_source(src.encode(), "example.py", Settings(select=frozenset({rule.code}))).diagnostics
    assert not diags, [f"{d.line}:{d.column} {d.message}" for d in diags]


@pytest.mark.parametrize("rule,i,ex", INVALID, ids=[f"{r.code}-invalid-{i}" for r, i, _ in INVALID])
def test_invalid_example_is_flagged_and_fixed(rule, i, ex):
    settings = Settings(select=frozenset({rule.code}), unsafe_fixes=ex.unsafe)
    diags = lint_source(ex.code.encode(), "example.py", settings).diagnostics
    assert any(d.code == rule.code for d in diags)
    out = fix_source(ex.code.encode(), "example.py", settings)
    if ex.fixed is None:
        assert out.source == ex.code.encode(), "an example without a fix must not change"
        return
    assert out.source.decode() == ex.fixed
    assert fix_source(out.source, "example.py", settings).source == out.source
    if not ex.unsafe:
        safe_only = fix_source(ex.code.encode(), "example.py", Settings(select=frozenset({rule.code})))
        assert safe_only.source.decode() == ex.fixed, "a safe fix must apply without --unsafe-fixes"
    else:
        safe_only = fix_source(ex.code.encode(), "example.py", Settings(select=frozenset({rule.code})))
        assert safe_only.source == ex.code.encode(), "an unsafe fix must need --unsafe-fixes"


@pytest.mark.parametrize("rule", all_rules(), ids=[r.code for r in all_rules()])
def test_rule_docs_have_every_section(rule):
    for section in ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety"):
        assert rule.doc_section(section), f"{rule.code} docs lack '{section}'"
    assert rule.VALID and rule.INVALID
