"""TensorFlow's first lines, printed before its logging starts, held to ``TF_CPP_MIN_LOG_LEVEL`` like the rest.

Example::

    with tf_preinit_lines(os.environ.get("TF_CPP_MIN_LOG_LEVEL")):
        importlib.import_module("localserve.runtimes.tensorflow")    # imports tensorflow

Recent TensorFlow (2.16+) writes two lines to file descriptor 2 while it is imported, through absl
before ``absl::InitializeLog()``, which ignores ``TF_CPP_MIN_LOG_LEVEL``: absl's warning that
early messages go to stderr, and the oneDNN notice (an INFO line). ``run --quiet`` and serve
set that variable to 2 (errors only), so they are dropped here when it says so; everything else
written to descriptor 2 during the import (other threads' log lines included) is written back
unchanged, in order, once the import is over.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

# (the lowest TF_CPP_MIN_LOG_LEVEL that hides it, the line)
_PREINIT = (
    (2, re.compile(rb"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$")),
    (1, re.compile(rb"^I\d{4} [\d:. ]+\d+ port\.cc:\d+\] oneDNN custom operations are on\.")),
)


def hidden(line: bytes, level: int) -> bool:
    """Whether ``line`` is one of TensorFlow's pre-init lines that ``TF_CPP_MIN_LOG_LEVEL=level`` hides."""
    return any(level >= at and pattern.match(line) for at, pattern in _PREINIT)


@contextlib.contextmanager
def tf_preinit_lines(min_log_level: str | None) -> Iterator[None]:
    """While inside, descriptor 2 goes to a file; on exit it is written back without the hidden pre-init lines."""
    try:
        level = int(min_log_level or 0)
    except ValueError:
        level = 0
    if level < 1:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().splitlines(keepends=True) if not hidden(line.rstrip(b"\n"), level)]
            data = memoryview(b"".join(kept))
            while data:
                data = data[os.write(2, data) :]
