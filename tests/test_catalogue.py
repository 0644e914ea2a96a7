"""The catalogue (devlint/catalogue.py) is the one table of rules: it must list every rule
file, agree with the classes, and keep every prefilter sound and linear."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devlint import catalogue, registry
from devlint.catalogue import Ordered
from devlint.facts import CONVERSIONS
from devlint.rule import Rule

RULES_DIR = Path(__file__).resolve().parent.parent / "rules"


def test_every_rule_file_is_catalogued_and_every_entry_has_its_class():
    files = sorted(p.stem for p in RULES_DIR.glob("dl*.py"))
    assert files == sorted(info.module.rsplit(".", 1)[1] for info in catalogue.RULES)
    for info, cls in zip(catalogue.RULES, registry.all_rules()):
        assert (cls.code, cls.name, cls.summary, cls.default_enabled, cls.prefilter) == \
               (info.code, info.name, info.summary, info.default_enabled, info.prefilter)
    assert [c.code for c in registry.meta_rules()] == [m.code for m in catalogue.META]


def test_a_rule_cannot_override_or_skip_the_catalogue():
    with pytest.raises(TypeError, match="set it in devlint/catalogue.py"):
        type("Clash", (Rule,), {"code": "DL002", "name": "other", "__module__": "devlint.rules.dl002_hardcoded_cuda"})
    with pytest.raises(TypeError, match="not catalogued"):
        type("Orphan", (Rule,), {"code": "DL050", "__module__": "devlint.rules.dl050_new"})
    with pytest.raises(TypeError, match="not catalogued"):  # the code of another module's rule
        type("Thief", (Rule,), {"code": "DL001", "__module__": "devlint.rules.dl002_hardcoded_cuda"})


def test_dl001_prefilter_matches_every_conversion_method():
    pf = catalogue.BY_CODE["DL001"].prefilter
    for m in CONVERSIONS:
        assert pf.search(f"x.{m}(y)".encode()), m
    assert not pf.search(b"x.tolist()\n")


def test_ordered_prefilter():
    o = Ordered(rb"\b(?:for|while)\b", rb"\.(?:to|cuda)\(")
    assert o.search(b"for x in xs:\n    x.to(d)\n")
    assert o.search(b"while True:\n    y = x.cuda()\n")
    assert not o.search(b"x.to(d)\nfor x in xs:\n    pass\n")  # the move comes before any loop
    assert not o.search(b"format(x).to_list()\n")  # `for` inside a word is no loop
    assert not o.search(b"for i in range(3): pass\n" * 2000)


def test_no_prefilter_regex_can_backtrack_over_the_whole_file():
    """`a[\\s\\S]*b` retries from every `a` and scans to the end each time: quadratic (52 s
    for a 480 KB file of loops). Such conditions are written as :class:`Ordered`."""
    for info in (*catalogue.RULES, *catalogue.META):
        if isinstance(info.prefilter, re.Pattern):
            assert not re.search(rb"\[\\s\\S\]\*|\.\*|\.\+", info.prefilter.pattern), info.code
