"""Runs the engine over files: read bytes, lint or fix, write back atomically."""

from __future__ import annotations

import contextlib
import difflib
import os
import signal
import stat
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass, field
from typing import Optional

from devlint.diagnostic import Diagnostic
from devlint.engine import Settings, fix_source, lint_source


@dataclass
class FileOutcome:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: Optional[str] = None  # a one-line problem: the file could not be linted or written
    fixed: int = 0
    diff: str = ""
    changed: bool = False
    new_source: Optional[bytes] = None  # the fixed source, when fixing

    def display_error(self) -> str:
        return f"{self.path}: {self.error}"


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


_DEFERRED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, n))


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT/SIGTERM/SIGHUP/SIGQUIT while a file is swapped in, so that an interrupt
    lands before or after the rename, never between writing and cleaning up."""
    can = hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED) if can else None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def atomic_write(path: str, data: bytes, expected_old: bytes) -> None:
    """Write ``data`` over ``path`` via a temporary file in the same directory and a rename,
    keeping the permission bits (and the owner, where allowed); refuse when the file changed
    since it was read. A symlink is written through (the link stays a link); a file with
    several hard links is refused (a rename would split them)."""
    real = os.path.realpath(path)
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise OSError("not a regular file; not overwritten")
    if st.st_nlink > 1:
        raise OSError(f"the file has {st.st_nlink} hard links and a rewrite would split them; not overwritten")
    d = os.path.dirname(real)
    with _signals_deferred():
        fd, tmp = tempfile.mkstemp(prefix=".devlint-", suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, st.st_mode & 0o7777)
            if hasattr(os, "chown") and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                try:
                    os.chown(tmp, st.st_uid, st.st_gid)
                except OSError:
                    pass  # not allowed: the fixed file belongs to whoever ran devlint
            # the last moment before the swap: was the file edited since it was read?
            now = os.stat(real)
            if (now.st_mtime_ns, now.st_size, now.st_ino) != (st.st_mtime_ns, st.st_size, st.st_ino) \
                    or read_bytes(real) != expected_old:
                raise OSError("file changed on disk while devlint was fixing it; not overwritten")
            os.replace(tmp, real)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    a = old.decode("utf-8", "replace").splitlines(keepends=True)
    b = new.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{path.lstrip('/')}", f"b/{path.lstrip('/')}"))


def process_file(path: str, display: str, settings: Settings, fix: bool = False,
                 diff: bool = False) -> FileOutcome:
    try:
        source = read_bytes(path)
    except OSError as exc:
        return FileOutcome(display, error=f"cannot read: {exc.strerror or exc}")
    return process_source(source, path, display, settings, fix=fix, diff=diff)


# Deeply nested expressions (long `a + b + ...` chains, `x.f().f()...`) exhaust Python's
# default recursion limit in LibCST's visitors; such a file is retried once on a thread
# with a large stack and a higher limit.
DEEP_RECURSION_LIMIT = 6_000
DEEP_STACK_SIZE = 512 * 1024 * 1024
_deep_lock = threading.Lock()


def _run_deep(fn, *args):
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = exc

    with _deep_lock:
        old_limit = sys.getrecursionlimit()
        old_stack = threading.stack_size()
        try:
            try:
                threading.stack_size(DEEP_STACK_SIZE)
            except (ValueError, RuntimeError):  # the platform refuses: stay within the default
                raise _TooDeep() from None
            sys.setrecursionlimit(max(old_limit, DEEP_RECURSION_LIMIT))
            t = threading.Thread(target=target, name="devlint-deep", daemon=True)
            t.start()
            t.join()
        finally:
            threading.stack_size(old_stack)
            sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]


class _TooDeep(Exception):
    pass


def _analyse(fn, *args):
    try:
        return fn(*args)
    except RecursionError:
        pass
    try:
        return _run_deep(fn, *args)
    except RecursionError:
        raise _TooDeep() from None


def _internal_error(exc: BaseException) -> str:
    """One line for a bug in devlint itself, naming the innermost devlint frame."""
    where = ""
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        fn = frame.f_code.co_filename
        parts = fn.replace(os.sep, "/").split("/")
        if len(parts) >= 2 and parts[-2] in ("devlint", "rules"):
            where = f" at {parts[-2]}/{parts[-1]}:{lineno}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"internal error ({type(exc).__name__}{': ' + text[:200] if text else ''}{where}); " \
           "file left unchanged; please report this devlint bug"


def process_source(source: bytes, path: Optional[str], display: str, settings: Settings,
                   fix: bool = False, diff: bool = False) -> FileOutcome:
    """Lint or fix one file's bytes. Never raises for a problem with this one file: the
    problem becomes the outcome's one-line ``error`` and the file is left as it was."""
    try:
        if not (fix or diff):
            return FileOutcome(display, _analyse(lint_source, source, display, settings).diagnostics)
        out = _analyse(fix_source, source, display, settings)
    except _TooDeep:
        return FileOutcome(display, error="too deeply nested to analyse; file left unchanged")
    except MemoryError:
        return FileOutcome(display, error="out of memory while analysing; file left unchanged")
    except Exception as exc:  # noqa: BLE001 - one bad file (or rule bug) must not end the run
        if os.environ.get("DEVLINT_DEBUG"):
            raise
        return FileOutcome(display, error=_internal_error(exc))
    res = FileOutcome(display, out.remaining, fixed=out.fixed)
    if out.problem:
        res.error = out.problem
    elif not out.converged:
        res.error = "fixes did not converge; file left unchanged"
    if out.source != source:
        res.changed = True
        if diff:
            res.diff = unified_diff(display, source, out.source)
        elif fix and path is not None:
            try:
                atomic_write(path, out.source, source)
            except OSError as exc:
                return FileOutcome(display, out.initial, error=f"cannot write: {exc.strerror or exc}")
    res.new_source = out.source
    return res
