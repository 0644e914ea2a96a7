"""Writing files so that nobody ever sees half of one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Iterator


@contextlib.contextmanager
def staged(directory: str, data: bytes, prefix: str, suffix: str = "", fsync: bool = False) -> Iterator[str]:
    """Write ``data`` to a new temporary file in ``directory`` (the target's file system, so
    ``os.replace`` onto the target is atomic) and yield its path for the caller to rename
    into place. Whatever happens in the block, no temporary file is left behind."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        yield tmp
    finally:
        with contextlib.suppress(OSError):  # already gone once renamed into place
            os.unlink(tmp)
