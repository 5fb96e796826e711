"""TensorFlow's first lines, written to descriptor 2 before its logging starts, held to ``TF_CPP_MIN_LOG_LEVEL``:
dropped at their levels, everything else written back in order once the import is over."""

from __future__ import annotations

import os

import pytest

from localserve.runtimes.preinit import hidden, tf_preinit_lines

ABSL = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
ONEDNN = b"I0000 00:00:1795653564.391230    2981 port.cc:153] oneDNN custom operations are on. You may see ..."


def test_the_preinit_filter_drops_only_those_lines_at_their_levels() -> None:
    assert [hidden(ABSL, level) for level in (0, 1, 2, 3)] == [False, False, True, True]
    assert [hidden(ONEDNN, level) for level in (0, 1, 2)] == [False, True, True]
    assert not hidden(b"Error: the handler answered 500:", 3)
    assert not hidden(b"E0000 00:00:1.0 1 port.cc:1] oneDNN custom operations are on.", 3)  # an error line stays


@pytest.mark.parametrize(
    ("level", "kept"),
    [
        ("2", b"before\nafter\n"),
        ("1", b"before\n" + ABSL + b"\nafter\n"),
        ("0", b"before\n" + ABSL + b"\n" + ONEDNN + b"\nafter\n"),  # not held at all
        ("bad", b"before\n" + ABSL + b"\n" + ONEDNN + b"\nafter\n"),
    ],
)
def test_what_descriptor_2_gets_while_inside_is_written_back_without_the_hidden_lines(
    level: str, kept: bytes, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    with tf_preinit_lines(level):
        for line in (b"before", ABSL, ONEDNN, b"after"):
            os.write(2, line + b"\n")  # as TensorFlow's C++ writes, under Python's sys.stderr
    assert capfdbinary.readouterr().err == kept
