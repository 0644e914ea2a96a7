"""The LibCST internals devlint relies on, checked once before the first parse.

devlint/walk.py drives LibCST's own traversal and code generation through a few private
pieces (for speed: one traversal for every rule, positions of only the reported nodes).
pyproject.toml pins LibCST to the minor versions they are tested against; should another
LibCST be installed anyway, devlint stops with one line saying what is missing, instead of
an internal error on every file.
"""

from __future__ import annotations

# (module, attribute path) that devlint/walk.py, devlint/rule.py and devlint/facts.py use
REQUIRED: tuple[tuple[str, str], ...] = (
    ("libcst", "CSTNode._visit_and_replace_children"),
    ("libcst", "CSTNode.__post_init__"),  # devlint/engine.py parses without per-node validation
    ("libcst", "CSTNode._codegen"),
    ("libcst", "Module._codegen"),
    ("libcst._nodes.internal", "CodegenState"),
    ("libcst._nodes.internal", "CodegenState.add_indent_tokens"),
    ("libcst._nodes.internal", "CodegenState.add_token"),
    ("libcst._nodes.internal", "CodegenState.pop_trailing_newline"),
    ("libcst._nodes.internal", "CodegenState.before_codegen"),
    ("libcst._nodes.internal", "CodegenState.after_codegen"),
    ("libcst._nodes.internal", "CodegenState.record_syntactic_position"),
    ("libcst._position", "CodePosition"),
    ("libcst._position", "CodeRange"),
    ("libcst._batched_visitor", "BatchableCSTVisitor"),
)
SUPPORTED = ">=1.1,<1.10"


class LibcstIncompatible(ImportError):
    """The installed LibCST lacks a piece devlint needs (one line, for the user)."""


_checked = False


def require() -> None:
    """Raise :class:`LibcstIncompatible` unless every piece of :data:`REQUIRED` exists."""
    global _checked
    if _checked:
        return
    missing = []
    for module, path in REQUIRED:
        try:
            # __import__, not importlib.import_module: the same path as an import
            # statement (which `python -X importtime` reports, tests/test_startup.py)
            obj = __import__(module, fromlist=["_"])
        except ImportError:
            missing.append(module)
            continue
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                missing.append(f"{module}.{path}")
                break
    if missing:
        try:
            from libcst._version import __version__ as version
        except ImportError:
            version = "?"
        raise LibcstIncompatible(
            f"LibCST {version} lacks {', '.join(missing)}, which devlint needs; "
            f"install a supported LibCST (pip install 'libcst{SUPPORTED}')")
    _checked = True
