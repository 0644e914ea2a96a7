"""The rule API: one class per rule, holding its docs, examples and visitor methods.

A rule is a LibCST ``BatchableCSTVisitor``: the engine runs every selected rule in
one traversal, after :class:`devlint.facts.ContextTracker` has updated the live
context. Rules read facts (``self.facts``, ``self.ctx``) and never re-derive them.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Optional

import libcst as cst
from libcst._batched_visitor import BatchableCSTVisitor

from devlint.diagnostic import Applicability, Fix

if TYPE_CHECKING:
    from devlint.engine import FileContext


@dataclass(frozen=True)
class Invalid:
    """An example the rule must flag; ``fixed`` is the expected ``--fix`` output."""

    code: str
    fixed: Optional[str] = None
    unsafe: bool = False  # the fix is applied only with --unsafe-fixes


@dataclass
class Report:
    rule: "Rule"
    node: cst.CSTNode
    message: str
    fix: Optional[Fix]


class Rule(BatchableCSTVisitor):
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    default_enabled: ClassVar[bool] = True
    # A file that does not match is not parsed for this rule (the cheap prefilter).
    prefilter: ClassVar[re.Pattern] = re.compile(rb"torch")
    VALID: ClassVar[list] = []
    INVALID: ClassVar[list] = []

    _visitor_cache: ClassVar[dict] = {}

    def __init__(self, ctx: "FileContext") -> None:
        super().__init__()
        self.ctx = ctx
        self.facts = ctx.facts
        self.t = ctx.tracker

    def get_visitors(self):
        # inspect.getmembers is slow; resolve the method names once per class
        names = Rule._visitor_cache.get(type(self))
        if names is None:
            names = tuple(BatchableCSTVisitor.get_visitors(self))
            Rule._visitor_cache[type(self)] = names
        return {n: getattr(self, n) for n in names}

    def report(self, node: cst.CSTNode, message: str, fix: Optional[Fix] = None) -> None:
        self.ctx.reports.append(Report(self, node, message, fix))

    def finish(self) -> None:
        """Called once after the traversal, for decisions that need whole-file facts."""

    # ---- docs ------------------------------------------------------------------------
    @classmethod
    def docs(cls) -> str:
        return textwrap.dedent(cls.__doc__ or "").strip()

    @classmethod
    def doc_section(cls, title: str) -> str:
        text = cls.docs()
        m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
        return m.group(1).strip() if m else ""


def safe(message: str, replacements: dict, **kw) -> Fix:
    return Fix(Applicability.SAFE, message, replacements, **kw)


def unsafe(message: str, replacements: dict, **kw) -> Fix:
    return Fix(Applicability.UNSAFE, message, replacements, **kw)
