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

from devlint import lazyre
from devlint.catalogue import BY_CODE, Prefilter
from devlint.diagnostic import Applicability, Fix

if TYPE_CHECKING:
    from devlint.context import FileContext


@dataclass(frozen=True)
class Invalid:
    """An example the rule must flag; ``fixed`` is the expected ``--fix`` output."""

    code: str
    fixed: Optional[str] = None
    unsafe: bool = False  # the fix is applied only with --unsafe-fixes


@dataclass
class Report:
    rule: "type[Rule]"  # the class: an instance would tie the file's context into a cycle
    node: cst.CSTNode
    message: str
    fix: Optional[Fix]


class Rule(BatchableCSTVisitor):
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    default_enabled: ClassVar[bool] = True
    # A file that does not match is not parsed for this rule (the cheap prefilter).
    prefilter: ClassVar[Prefilter] = lazyre.compile(rb"torch")
    VALID: ClassVar[list] = []
    INVALID: ClassVar[list] = []

    _visitor_cache: ClassVar[dict] = {}

    def __init_subclass__(cls, **kwargs) -> None:
        """A rule declares its ``code``; its name, summary, default and prefilter come from
        the catalogue (``devlint/catalogue.py``), which is read without importing LibCST."""
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if not code:
            return
        info = BY_CODE.get(code)
        if info is None and not cls.__module__.startswith("devlint."):
            return  # a rule defined outside devlint (a test's): it sets its own fields
        if info is None or info.module != cls.__module__:
            raise TypeError(f"{cls.__module__}.{cls.__name__}: {code} is not catalogued for this module "
                            "in devlint/catalogue.py")
        for attr in ("name", "summary", "default_enabled", "prefilter"):
            if attr in cls.__dict__:
                raise TypeError(f"{cls.__name__}.{attr}: set it in devlint/catalogue.py, not in the class")
            setattr(cls, attr, getattr(info, attr))

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
        self.ctx.reports.append(Report(type(self), node, message, fix))

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
