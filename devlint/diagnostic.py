"""The values every stage agrees on: diagnostics, fixes and their applicability."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Applicability(str, enum.Enum):
    """How safe a fix is to apply blind (ruff's three levels)."""

    SAFE = "safe"  # `--fix` applies it
    UNSAFE = "unsafe"  # `--fix --unsafe-fixes` applies it
    DISPLAY = "display-only"  # shown, never applied

    def __str__(self) -> str:
        return self.value


@dataclass
class Fix:
    """A fix: CST node replacements keyed on node identity, plus file-level needs.

    ``replacements`` maps an original node of the parsed module to the node that
    replaces it. ``needs_device_var`` asks the fixer to make sure the file's
    device variable (``Edit.device_name``) exists after the imports.
    """

    applicability: Applicability
    message: str = ""
    replacements: dict = field(default_factory=dict, repr=False, compare=False)
    needs_device_var: bool = False
    needs_torch_import: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"applicability": str(self.applicability), "message": self.message}


@dataclass
class Diagnostic:
    code: str
    name: str
    message: str
    filename: str
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int  # 1-based, one past the end
    fix: Fix | None = None
    cell: int | None = None  # notebook cell (1-based), when linting .ipynb
    # codes of other rules' findings on the same expression that this one stands for
    # (devlint.engine.SUBSUMES); a `# noqa` naming any of them suppresses this finding
    also: tuple = ()

    @property
    def codes(self) -> tuple:
        """This finding's code and the codes it stands for."""
        return (self.code, *self.also)

    @property
    def fixable(self) -> bool:
        return self.fix is not None and self.fix.applicability is not Applicability.DISPLAY

    def sort_key(self) -> tuple:
        return (self.filename, self.cell or 0, self.line, self.column, self.code)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "filename": self.filename,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "fix": self.fix.to_dict() if self.fix else None,
            "fixable": self.fixable,
        }
        if self.also:
            d["also"] = list(self.also)
        if self.cell is not None:
            d["cell"] = self.cell
        return d
