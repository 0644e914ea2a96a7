"""The one object a rule is given about the file it lints: the parsed module, the file's
facts (computed once, before any rule runs), the settings and the context tracker.

It sits below the engine (devlint.engine builds it; devlint.rule and devlint.fixes read
it), so nothing that rules import needs the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from devlint.facts import ContextTracker, FileFacts
from devlint.fixes import device_var_name
from devlint.settings import Settings

if TYPE_CHECKING:
    from devlint.rule import Report


class FileContext:
    """Everything a rule may read about the file being linted."""

    def __init__(self, module: cst.Module, facts: FileFacts, settings: Settings, filename: str) -> None:
        self.module = module
        self.facts = facts
        self.settings = settings
        self.filename = filename
        self.tracker = ContextTracker(facts)
        self.reports: list[Report] = []
        self.new_device_name = device_var_name(facts, settings.device_name)
        top = set(map(id, module.body))
        self.module_level_device_nodes = {dv.node for dv in facts.device_vars
                                          if dv.scope is None and id(dv.node) in top}
