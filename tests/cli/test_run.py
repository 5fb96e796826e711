"""``localserve run``'s own pieces: the body ``--input`` names (read no further than the limit), its guessed
Content-Type, and ``--header`` items. The command itself runs in tests/cli/test_cli.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from localserve.cli.run import _split_header, read_input, request_headers
from localserve.errors import ConfigError


def test_the_content_type_is_guessed_from_the_files_name(tmp_path: Path) -> None:
    for name, guessed in [
        ("a.json", "application/json"),
        ("a.jpg", "image/jpeg"),
        ("a.unknownext", "application/octet-stream"),
    ]:
        (tmp_path / name).write_bytes(b"{}")
        assert read_input(str(tmp_path / name), 100) == (b"{}", guessed)
    assert read_input(None, 100) == (b"", None)


def test_a_content_type_is_added_unless_a_header_names_one() -> None:
    assert request_headers([("X-A", "1")], "image/png") == [("X-A", "1"), ("Content-Type", "image/png")]
    assert request_headers([("content-type", "text/plain")], "image/png") == [("content-type", "text/plain")]
    assert request_headers([], None) == []


def test_header_items_are_split_at_the_first_colon() -> None:
    assert _split_header(" Accept : application/json ") == ("Accept", "application/json")
    assert _split_header("X-Url: http://h:1/") == ("X-Url", "http://h:1/")
    for bad in ("Accept", ": value"):
        with pytest.raises(ConfigError) as caught:
            _split_header(bad)
        assert str(caught.value) == f"Invalid --header {bad!r}: expected NAME:VALUE, e.g. 'Accept: application/json'."


def test_run_input_that_is_a_folder_or_cannot_be_read_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        read_input(str(tmp_path), 100)
    assert str(info.value) == f"--input {str(tmp_path)!r} is a directory; expected a file (or - for standard input)."
    with pytest.raises(ConfigError) as info:
        read_input(str(tmp_path / "missing.json"), 100)
    assert str(info.value) == f"--input {str(tmp_path / 'missing.json')!r}: no such file."
    if Path("/proc/self/mem").exists():  # Linux: a file that exists and that read() refuses (EIO), even for root
        with pytest.raises(ConfigError) as info:
            read_input("/proc/self/mem", 100)
        assert str(info.value) == "--input '/proc/self/mem' cannot be read: Input/output error."


TOO_LARGE = "The request body is too large: at least 1025 bytes; the limit is 1024 bytes (--max-body-size)."


def test_run_input_past_the_body_limit_is_the_server_s_413_error_read_no_further(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file, a device that never ends (/dev/zero) and stdin stop at the limit a request body has."""
    import io

    from localserve.cli.run import read_input
    from localserve.errors import PayloadTooLarge

    exact, over = tmp_path / "exact.bin", tmp_path / "over.bin"
    exact.write_bytes(b"x" * 1024)
    over.write_bytes(b"x" * 5000)
    assert read_input(str(exact), 1024) == (b"x" * 1024, "application/octet-stream")
    for source in (str(over), "/dev/zero"):
        with pytest.raises(PayloadTooLarge) as info:
            read_input(source, 1024)
        assert str(info.value) == TOO_LARGE
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"y" * 5000)))
    with pytest.raises(PayloadTooLarge) as info:
        read_input("-", 1024)
    assert str(info.value) == TOO_LARGE
