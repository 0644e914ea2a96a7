"""What a run's results depend on besides the files: the selected codes and fix options.

Read without importing LibCST (see :mod:`devlint.catalogue`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from devlint import registry
from devlint.catalogue import META, RULES, RuleInfo
from devlint.diagnostic import Applicability, Fix

if TYPE_CHECKING:
    from devlint.project import ProjectFacts
    from devlint.rule import Rule


@dataclass(frozen=True)
class Settings:
    select: frozenset = field(default_factory=lambda: registry.resolve())
    unsafe_fixes: bool = False
    fix_style: str = "cuda"  # or "accelerator"
    device_name: str = "device"
    # (code, line hash) pairs of a baseline that this file's findings are checked against
    baseline: frozenset = frozenset()
    # DL000 (the file cannot be parsed) is reported whatever is selected, unless ignored
    parse_errors: bool = True
    # project-wide facts (devlint.project): the configuration's directory, if any, where the
    # project root is looked for, the lint cache (summaries are kept beside the results), and
    # the facts of this one file once computed (None: not yet; part of the cache key)
    project_root: Optional[str] = None
    project_cache: Optional[str] = None
    project: Optional["ProjectFacts"] = None
    use_project: bool = True

    def infos(self) -> tuple[RuleInfo, ...]:
        """The selected rules' catalogue entries, DL100's included (no LibCST import)."""
        return tuple(r for r in (*RULES, *META) if r.code in self.select)

    def rules(self) -> tuple[type["Rule"], ...]:
        """The selected rule classes (imports them, and LibCST)."""
        return tuple(r for r in registry.all_rules() if r.code in self.select)

    def key(self) -> str:
        """What the results depend on besides the file's content (for caches)."""
        return repr((sorted(self.select), self.unsafe_fixes, self.fix_style, self.device_name,
                     sorted(self.baseline), self.parse_errors, self.project.key() if self.project else ""))


# For benchmarks only: DEVLINT_NO_PROJECT=1 lints each file on its own (benchmarks/bench.py
# times what the project index costs that way).
_NO_PROJECT = os.environ.get("DEVLINT_NO_PROJECT") == "1"


def with_project(settings: Settings, path: Optional[str], source: Optional[bytes]) -> Settings:
    """``settings`` with the project facts of the file at ``path`` (whose Python source is
    ``source``), computed once: what the rest of the project says about it (devlint.project)."""
    if settings.project is not None or not settings.use_project or path is None or _NO_PROJECT:
        return settings
    import dataclasses

    from devlint.project import facts_for

    return dataclasses.replace(settings, project=facts_for(path, source, settings.project_root,
                                                           settings.project_cache))


def applicable(fix: Optional[Fix], settings: Settings) -> bool:
    """Whether ``--fix`` (with these settings) applies this fix."""
    if fix is None:
        return False
    if fix.applicability is Applicability.SAFE:
        return True
    return fix.applicability is Applicability.UNSAFE and settings.unsafe_fixes
