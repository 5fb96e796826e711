"""TensorFlow's first lines, printed before its logging starts, held to ``TF_CPP_MIN_LOG_LEVEL`` like the rest.

Example::

    with tf_preinit_lines(os.environ.get("TF_CPP_MIN_LOG_LEVEL")):
        importlib.import_module("localserve.runtimes.tensorflow")    # imports tensorflow

TensorFlow 2.16+ writes two lines to descriptor 2 while imported, through absl before ``absl::InitializeLog()``,
whatever ``TF_CPP_MIN_LOG_LEVEL`` says: absl's early-messages warning and the oneDNN notice. They are dropped here when
that variable asks (``run --quiet`` and serve set 2); everything else written to descriptor 2 meanwhile is written back
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
