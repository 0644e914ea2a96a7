"""`devlint server` spoken to as an editor would: a subprocess on stdio, JSON-RPC with
Content-Length framing written here (no pygls client), every wait bounded."""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from click.testing import CliRunner

from devlint.cli import main

needs_pygls = pytest.mark.skipif(importlib.util.find_spec("pygls") is None,
                                 reason="pygls is in the `test` extra (pip install -e '.[test]')")

TIMEOUT = 60  # seconds for any one answer (the first lint imports LibCST and the rules)

SOURCE = '''\
import torch

model = torch.nn.Linear(4, 2).cuda()
data = torch.ones(8, 4)
label = "é🚀"; x = data.cuda()
x.to("cpu")
print(model(x).sum().item(), label)
'''


class Client:
    def __init__(self, cwd: Path) -> None:
        self.log = cwd / "server-stderr.log"  # a file, not a pipe: the server never blocks on it
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "devlint", "server"], cwd=cwd,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                k, _, v = line.decode("ascii").partition(":")
                headers[k.strip().lower()] = v.strip()
            self.inbox.put(json.loads(out.read(int(headers["content-length"]))))

    def send(self, payload: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **payload}).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params) -> dict:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        msg = self.wait(lambda m: m.get("id") == self.next_id and "method" not in m)
        assert "error" not in msg, msg
        return msg["result"]

    def wait(self, match) -> dict:
        deadline = time.monotonic() + TIMEOUT
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "no answer from devlint server in time"
            try:
                msg = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            assert msg is not None, f"devlint server closed stdout: {self.log.read_text()[-4000:]}"
            if "method" in msg and "id" in msg:  # a request from the server: answer it
                self.send({"id": msg["id"], "result": None})
            if match(msg):
                return msg

    def diagnostics(self, uri: str) -> dict:
        return self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                         and m["params"]["uri"] == uri)["params"]

    def close(self) -> int:
        try:
            if self.proc.poll() is None:
                self.request("shutdown", None)
                self.notify("exit", None)
            return self.proc.wait(timeout=TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def client(tmp_path):
    if importlib.util.find_spec("pygls") is None:
        pytest.skip("pygls is in the `test` extra (pip install -e '.[test]')")
    c = Client(tmp_path)
    try:
        init = c.request("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(),
                                        "capabilities": {"general": {"positionEncodings": ["utf-16"]}}})
        c.capabilities = init["capabilities"]
        c.notify("initialized", {})
        yield c
    finally:
        c.close()


def utf16_offset(text: str, pos: dict) -> int:
    """The string index of an LSP position (UTF-16 code units, the default encoding)."""
    lines = text.splitlines(keepends=True)
    start = sum(len(line) for line in lines[:pos["line"]])
    line = lines[pos["line"]] if pos["line"] < len(lines) else ""
    units = 0
    for i, ch in enumerate(line):
        if units >= pos["character"]:
            return start + i
        units += 2 if ord(ch) > 0xFFFF else 1
    return start + len(line)


def apply_edits(text: str, edits: list[dict]) -> str:
    spans = sorted(((utf16_offset(text, e["range"]["start"]), utf16_offset(text, e["range"]["end"]),
                     e["newText"]) for e in edits), reverse=True)
    for a, b, new in spans:
        text = text[:a] + new + text[b:]
    return text


def open_doc(client, path: Path, text: str, version: int = 1) -> str:
    uri = path.as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": version, "text": text}})
    return uri


def cli_fix(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(main, ["check", "--fix", "--no-cache", str(path)])
    assert res.exit_code in (0, 1), res.output
    return path.read_text(encoding="utf-8")


def test_diagnostics_change_and_quickfix_equal_devlint_fix(client, tmp_path):
    assert client.capabilities["codeActionProvider"]["codeActionKinds"] == ["quickfix", "source.fixAll.devlint"]
    doc = tmp_path / "train.py"
    uri = open_doc(client, doc, SOURCE)
    published = client.diagnostics(uri)
    assert published["version"] == 1
    diags = published["diagnostics"]
    # the same findings as the CLI, 0-based, and every range covers the flagged code
    # (line 5 has a non-BMP character before the finding: UTF-16 columns, not code points)
    assert [(d["code"], d["range"]["start"]["line"]) for d in diags] == [
        ("DL002", 2), ("DL002", 4), ("DL001", 5)]
    flagged = [SOURCE[utf16_offset(SOURCE, d["range"]["start"]):utf16_offset(SOURCE, d["range"]["end"])]
               for d in diags]
    assert flagged == ["torch.nn.Linear(4, 2).cuda()", "data.cuda()", 'x.to("cpu")']
    assert {d["source"] for d in diags} == {"devlint"}
    assert all(d["data"]["fix"] == "safe" for d in diags)

    # an incremental edit: line 6 (`x.to("cpu")`) becomes an assignment, its DL001 goes
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": {"start": {"line": 5, "character": 0},
                                      "end": {"line": 5, "character": 0}}, "text": "x = "}]})
    edited = SOURCE.replace('x.to("cpu")', 'x = x.to("cpu")')
    published = client.diagnostics(uri)
    assert published["version"] == 2
    assert [(d["code"], d["range"]["start"]["line"]) for d in published["diagnostics"]] == [
        ("DL002", 2), ("DL002", 4)]

    # the quickfix, applied to the editor's text, is what `devlint --fix` writes
    actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri},
        "range": published["diagnostics"][0]["range"],
        "context": {"diagnostics": published["diagnostics"][:1], "only": ["quickfix"]}})
    assert [a["kind"] for a in actions] == ["quickfix"]
    (action,) = actions
    assert action["diagnostics"] == published["diagnostics"][:1]
    edits = action["edit"]["changes"][uri]
    fixed = apply_edits(edited, edits)
    assert fixed == cli_fix(tmp_path / "copy.py", edited)
    assert "cuda()" not in fixed and "torch.device(" in fixed
    assert edits[0]["range"]["start"]["line"] > 0  # a minimal edit, not the whole document

    # the fixed text, sent back, has nothing left to report and nothing left to fix
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3},
                                             "contentChanges": [{"text": fixed}]})
    assert client.diagnostics(uri)["diagnostics"] == []
    assert client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": edits[0]["range"],
        "context": {"diagnostics": [], "only": ["source.fixAll"]}}) is None


def test_fix_all_on_save_and_project_config(client, tmp_path):
    """`source.fixAll.devlint` (format-on-save style) and the project's [tool.devlint]:
    an ignored rule is neither reported nor fixed, an excluded file gets no diagnostics."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.devlint]\nignore = ["DL001"]\nextend-exclude = ["vendored/"]\n'
        'device-name = "dev"\n')
    doc = tmp_path / "train.py"
    uri = open_doc(client, doc, SOURCE)
    assert [d["code"] for d in client.diagnostics(uri)["diagnostics"]] == ["DL002", "DL002"]
    actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": [], "only": ["source.fixAll"]}})
    assert [a["kind"] for a in actions] == ["source.fixAll.devlint"]
    fixed = apply_edits(SOURCE, actions[0]["edit"]["changes"][uri])
    assert fixed == cli_fix(tmp_path / "copy.py", SOURCE)
    assert 'x.to("cpu")\n' in fixed and "dev = torch.device(" in fixed  # DL001 ignored, device-name

    (tmp_path / "vendored").mkdir()
    vendored = open_doc(client, tmp_path / "vendored" / "lib.py", SOURCE)
    assert client.diagnostics(vendored)["diagnostics"] == []


def test_bad_config_is_shown_and_saving_the_config_relints(client, tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.devlint]\nselct = ["DL002"]\n')
    uri = open_doc(client, tmp_path / "train.py", SOURCE)
    shown = client.wait(lambda m: m.get("method") == "window/showMessage")["params"]
    assert shown["type"] == 1 and f"{config}:2: [tool.devlint] selct: unknown key" in shown["message"]
    assert client.diagnostics(uri)["diagnostics"] == []  # like the CLI's exit 2: nothing linted
    config.write_text('[tool.devlint]\nselect = ["DL001"]\n')
    client.notify("textDocument/didSave", {"textDocument": {"uri": config.as_uri()}})
    assert [d["code"] for d in client.diagnostics(uri)["diagnostics"]] == ["DL001"]


def test_syntax_error_is_an_error_diagnostic_and_close_clears(client, tmp_path):
    uri = open_doc(client, tmp_path / "broken.py", "import torch\nx = torch.ones(2\n")
    (d,) = client.diagnostics(uri)["diagnostics"]
    assert d["code"] == "DL000" and d["severity"] == 1  # Error; findings are warnings (2)
    assert client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": d["range"],
        "context": {"diagnostics": [d]}}) is None  # nothing to fix in a file that does not parse
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri)["diagnostics"] == []


@needs_pygls
def test_shutdown_and_exit_end_the_process(tmp_path):
    c = Client(tmp_path)
    c.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    c.notify("initialized", {})
    assert c.close() == 0


def test_without_pygls_one_line_and_exit_2(tmp_path):
    """pygls is optional: without it `devlint server` says how to get it."""
    code = ("import sys; sys.modules['pygls'] = None; sys.argv = ['devlint', 'server']\n"
            "from devlint.cli import main; main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert proc.stderr == 'devlint: error: devlint server needs pygls: pip install "devlint[lsp]"\n'
    assert proc.stdout == ""


def test_cli_import_does_not_import_pygls():
    code = ("import sys, devlint.cli\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.stdout == "[]\n", proc.stderr


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab\r\n", max_size=12), st.text(alphabet="ab\r\n", max_size=12))
def test_minimal_edit_applied_gives_the_new_text(old, new):
    from devlint.server import lines_of, minimal_edit

    start, end_line, end_char, text = minimal_edit(old, new)
    lines = lines_of(old)

    def offset(line: int, char: int) -> int:
        return sum(map(len, lines[:line])) + char

    assert old[:offset(start, 0)] + text + old[offset(end_line, end_char):] == new
    assert "".join(lines) == old
