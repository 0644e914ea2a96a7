"""`devlint server`: a Language Server (LSP over stdin/stdout) for editors.

Diagnostics are published when a Python document is opened, changed or saved; the safe
fixes (what `devlint --fix` applies) are offered as code actions: a ``quickfix`` on
fixable findings and ``source.fixAll.devlint`` (VS Code: ``editor.codeActionsOnSave``).
Everything is devlint's own pipeline: the nearest ``[tool.devlint]`` / ``devlint.toml``
above the document (devlint.config) chooses the rules, per-file ignores, excludes, device
name and fix style, and :func:`devlint.runner.process_source` (engine.lint_source /
engine.fix_source) lints and fixes the editor's text. Nothing is written to disk: an
edit goes back to the editor, which applies it.

pygls is an optional dependency (``pip install "devlint[lsp]"``): it is imported only
here, only by `devlint server`.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Optional

INSTALL_HINT = 'devlint server needs pygls: pip install "devlint[lsp]"'
FIX_ALL = "source.fixAll.devlint"
CONFIG_FILES = ("pyproject.toml", "devlint.toml")

# LSP line breaks are \n, \r\n and \r only (str.splitlines also splits on \f, \x1c, ...,
# which Python's tokenizer, and so devlint's line numbers, do not)
_LINE = re.compile(r".*?(?:\r\n|\r|\n)|.+", re.S)


def lines_of(text: str) -> list[str]:
    return _LINE.findall(text)


def minimal_edit(old: str, new: str) -> tuple[int, int, int, str]:
    """``(start_line, end_line, end_char, text)``: replace ``old`` from the start of
    ``start_line`` to (``end_line``, ``end_char`` code points) with ``text`` and it becomes
    ``new``. Only the lines that differ are replaced (the editor keeps cursor and folds)."""
    a, b = lines_of(old), lines_of(new)
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s] and a[-1 - s][-1:] in "\r\n":
        s += 1  # a line ending the document without a newline is never a shared suffix
    end = len(a) - s
    if s == 0 and a and a[-1][-1:] not in ("\r", "\n"):
        end_line, end_char = len(a) - 1, len(a[-1])  # up to the end of the last line
    else:
        end_line, end_char = end, 0
    return p, end_line, end_char, "".join(b[p:len(b) - s])


def _encoding(raw: bytes) -> str:
    """The PEP 263 encoding the file declares (devlint reads the bytes the way Python does)."""
    import io
    import tokenize

    try:
        return tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
    except SyntaxError:
        return "utf-8"


class _Project:
    """The settings devlint's CLI would use for one document (config found above it)."""

    def __init__(self, path: str) -> None:
        from devlint import config as cfg
        from devlint import registry
        from devlint.settings import Settings

        found = cfg.find_config(path)
        conf = cfg.load_config(found) if found else cfg.Config(root=_root_of(path))
        self.config = found
        self.excluded = bool(conf.exclude + conf.extend_exclude) and cfg.PathFilter(
            conf.root, conf.exclude + conf.extend_exclude, respect_gitignore=False).excluded(path, ancestors=True)
        codes = conf.codes()
        codes -= cfg.PerFileIgnores(conf.root, conf.per_file_ignores).codes_for(path)
        self.settings = Settings(select=frozenset(codes), fix_style=conf.fix_style or "cuda",
                                 device_name=conf.device_name or "device")


def _root_of(path: str):
    from pathlib import Path

    return Path(path).parent.absolute()


def serve() -> None:
    """Run the server on stdin/stdout until the client says `exit`."""
    try:
        from lsprotocol import types as lsp
        from pygls.lsp.server import LanguageServer
    except ImportError:
        print(f"devlint: error: {INSTALL_HINT}", file=sys.stderr)
        sys.exit(2)
    server = build(LanguageServer, lsp)
    server.start_io()


def build(LanguageServer, lsp):  # noqa: C901 - the handlers share the server's state
    from devlint import __version__
    from devlint.config import ConfigError
    from devlint.diagnostic import Applicability

    server = LanguageServer("devlint", __version__)
    shown: set[str] = set()  # config errors already shown (once each, not on every keystroke)

    def path_of(doc) -> str:
        if doc.uri.startswith("file:"):
            return doc.path
        root = server.workspace.root_path or os.getcwd()  # untitled buffers: the workspace's config
        return os.path.join(root, os.path.basename(doc.path or "untitled") or "untitled")

    def is_python(doc) -> bool:
        if (doc.path or "").endswith(".ipynb"):
            return False  # a notebook opened as JSON text
        return doc.language_id == "python" or (doc.path or "").endswith((".py", ".pyi"))

    def project(doc) -> Optional[_Project]:
        try:
            return _Project(path_of(doc))
        except (ConfigError, ValueError) as exc:  # ValueError: a bad code in per-file-ignores
            message = f"devlint: {exc}"
            if message not in shown:
                shown.add(message)
                server.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, message))
            return None

    def run(doc, fix: bool):
        """devlint's outcome for the document's current text, or None (not linted)."""
        from devlint.runner import process_source
        from devlint.settings import with_project

        proj = project(doc)
        if proj is None or proj.excluded:
            return None, None
        text = doc.source
        raw = text.encode("utf-8")
        enc = _encoding(raw)
        if enc != "utf-8":
            try:
                raw = text.encode(enc)
            except (UnicodeEncodeError, LookupError):
                enc = "utf-8"
        # the editor's text, read with the rest of the project as the CLI reads it
        settings = with_project(proj.settings, path_of(doc), raw if not path_of(doc).endswith(".ipynb") else None)
        out = process_source(raw, None, os.path.basename(path_of(doc)), settings, fix=fix)
        if out.error:
            server.window_log_message(lsp.LogMessageParams(lsp.MessageType.Error, f"devlint: {out.display_error()}"))
        return out, enc

    def to_lsp(doc, lines, d):
        codec = server.workspace.position_codec
        start = codec.position_to_client_units(lines, lsp.Position(max(d.line - 1, 0), max(d.column - 1, 0)))
        end = codec.position_to_client_units(lines, lsp.Position(max(d.end_line - 1, 0), max(d.end_column - 1, 0)))
        fix = str(d.fix.applicability) if d.fix is not None else None
        return lsp.Diagnostic(
            range=lsp.Range(start, end), message=d.message, source="devlint", code=d.code,
            severity=lsp.DiagnosticSeverity.Error if d.code == "DL000" else lsp.DiagnosticSeverity.Warning,
            data={"fix": fix, "name": d.name})

    def publish(uri: str) -> None:
        doc = server.workspace.get_text_document(uri)
        if not is_python(doc):
            return
        out, _ = run(doc, fix=False)
        diags = []
        if out is not None:
            lines = lines_of(doc.source)
            diags = [to_lsp(doc, lines, d) for d in out.diagnostics]
        server.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, version=doc.version, diagnostics=diags))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params: lsp.DidOpenTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: lsp.DidChangeTextDocumentParams) -> None:
        publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls, params: lsp.DidSaveTextDocumentParams) -> None:
        if os.path.basename(params.text_document.uri) in CONFIG_FILES:
            shown.clear()  # a saved config: every open document is linted again under it
            for uri in list(server.workspace.text_documents):
                publish(uri)
        else:
            publish(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: lsp.DidCloseTextDocumentParams) -> None:
        server.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL]))
    def code_action(ls, params: lsp.CodeActionParams):
        only = params.context.only
        wants = (lambda kind: only is None or any(kind == k or kind.startswith(f"{k}.") for k in only))
        fixable = [d for d in params.context.diagnostics
                   if d.source == "devlint" and isinstance(d.data, dict)
                   and d.data.get("fix") == str(Applicability.SAFE)]
        kinds = ([lsp.CodeActionKind.QuickFix] if fixable and wants(lsp.CodeActionKind.QuickFix) else []) \
            + ([FIX_ALL] if wants(FIX_ALL) else [])
        if not kinds:
            return None
        doc = server.workspace.get_text_document(params.text_document.uri)
        if not is_python(doc):
            return None
        out, enc = run(doc, fix=True)
        if out is None or out.error or out.new_source is None:
            return None
        new = out.new_source.decode(enc)
        if new == doc.source:
            return None
        start, end_line, end_char, text = minimal_edit(doc.source, new)
        lines = lines_of(doc.source)
        end = server.workspace.position_codec.position_to_client_units(lines, lsp.Position(end_line, end_char)) \
            if end_char else lsp.Position(end_line, 0)
        edit = lsp.TextEdit(range=lsp.Range(lsp.Position(start, 0), end), new_text=text)
        caps = server.client_capabilities.workspace
        if caps and caps.workspace_edit and caps.workspace_edit.document_changes:
            workspace_edit = lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
                lsp.OptionalVersionedTextDocumentIdentifier(doc.uri, doc.version), [edit])])
        else:
            workspace_edit = lsp.WorkspaceEdit(changes={doc.uri: [edit]})
        n = out.fixed
        title = f"devlint: apply the safe fixes in this file ({n} finding{'s' if n != 1 else ''}, as `devlint --fix`)"
        return [lsp.CodeAction(title=title, kind=kind, edit=workspace_edit,
                               diagnostics=fixable if kind == lsp.CodeActionKind.QuickFix else None,
                               is_preferred=kind == lsp.CodeActionKind.QuickFix or None)
                for kind in kinds]

    return server
