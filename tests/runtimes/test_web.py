"""Model downloads over HTTP against a real server on loopback that drops a connection mid-body: resumed with
``Range``, checked against the checksums given, and followed in log lines when stderr is not a terminal."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Any

import pytest

from localserve.errors import ModelLoadError
from localserve.runtimes.sources import resolve_model
from tests.runtimes.site import PIECE, MiB, Site, files


def test_a_dropped_connection_is_resumed_with_range_and_the_bytes_are_exact(
    serve_site: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = os.urandom(3 * MiB)
    site = Site(body, drop_at=MiB + 5 * PIECE)
    url = serve_site(site)
    caplog.set_level("INFO", logger="localserve")
    path = resolve_model(f"{url}/m.onnx", tmp_path, cache_root=tmp_path / "cache", progress=False)
    assert path.read_bytes() == body
    first, second = site.seen
    assert first == {"range": None, "if-range": None}
    resumed_at = int(second["range"].removeprefix("bytes=").removesuffix("-"))  # type: ignore[union-attr]
    assert 0 < resumed_at <= MiB + 5 * PIECE  # what had arrived is not asked for again
    assert second["if-range"] == '"v1"'  # a file changed meanwhile would come whole
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"Download of {url}/m.onnx: the connection dropped (")
    assert warnings[0].endswith("of 3.0 MiB; trying again in 0.5 s (try 2 of 4)")
    assert files(tmp_path / "cache") == [path]  # no .part left


def test_a_server_without_ranges_sends_it_all_again(serve_site: Any, tmp_path: Path) -> None:
    body = os.urandom(2 * MiB)
    site = Site(body, drop_at=MiB, ranges=False)
    url = serve_site(site)
    path = resolve_model(f"{url}/m.onnx", tmp_path, cache_root=tmp_path / "cache", progress=False)
    assert path.read_bytes() == body  # the bytes of the first try were thrown away, not doubled
    assert len(site.seen) == 2 and site.seen[1]["range"] is not None


def test_the_url_fragments_checksum_is_checked(serve_site: Any, tmp_path: Path) -> None:
    body = os.urandom(MiB)
    url = serve_site(Site(body))
    good = hashlib.sha256(body).hexdigest()
    path = resolve_model(f"{url}/m.onnx#sha256={good}", tmp_path, cache_root=tmp_path / "cache", progress=False)
    assert path.read_bytes() == body and path.name == "m.onnx"
    wrong = "0" * 64
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"{url}/m.onnx#sha256={wrong}", tmp_path, cache_root=tmp_path / "other", progress=False)
    assert str(info.value) == (
        f"Cannot download the model {url}/m.onnx: its sha256 is {good}, but the URL's #sha256 says {wrong}; "
        "the file was not kept."
    )
    assert files(tmp_path / "other") == []
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"{url}/m.onnx#sha256=abc", tmp_path, cache_root=tmp_path / "other", progress=False)
    assert str(info.value) == (
        f"Cannot download the model {url}/m.onnx: #sha256=abc is not a sha256 digest (expected 64 hex digits)."
    )


def test_the_servers_content_md5_is_checked(serve_site: Any, tmp_path: Path) -> None:
    body = os.urandom(MiB)
    stated = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
    url = serve_site(Site(body, headers={"Content-MD5": stated}))
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"{url}/m.onnx", tmp_path, cache_root=tmp_path / "cache", progress=False)
    assert str(info.value) == (
        f"Cannot download the model {url}/m.onnx: its md5 is {hashlib.md5(body).hexdigest()}, but the server's "
        f"Content-MD5 says {hashlib.md5(b'something else').hexdigest()}; the file was not kept."
    )
    assert files(tmp_path / "cache") == []
    right = base64.b64encode(hashlib.md5(body).digest()).decode()
    url = serve_site(Site(body, drop_at=MiB // 2, headers={"x-goog-hash": f"crc32c=AAAAAA==,md5={right}"}))
    path = resolve_model(f"{url}/m.onnx", tmp_path, cache_root=tmp_path / "cache", progress=False)
    assert path.read_bytes() == body  # resumed, and the digest spans both responses


def test_progress_is_logged_when_stderr_is_not_a_terminal(
    serve_site: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = os.urandom(8 * MiB)
    url = serve_site(Site(body))
    caplog.set_level("INFO", logger="localserve")
    resolve_model(f"{url}/big.onnx", tmp_path, cache_root=tmp_path / "cache", progress=None)  # pytest's stderr
    lines = [r.getMessage() for r in caplog.records if r.name == "localserve"]
    assert lines[0] == f"Downloading {url}/big.onnx (8.0 MiB)"
    assert lines[-1].startswith(f"Downloaded {url}/big.onnx (8.0 MiB) in ")
    pattern = re.compile(
        rf"Downloading {re.escape(url)}/big\.onnx: (\d+)% \([\d.]+ (?:KiB|MiB) of 8\.0 MiB\), [\d.]+ (?:B|KiB|MiB|GiB)/s, ETA \d+ s"
    )
    steps = [int(m.group(1)) for line in lines[1:-1] if (m := pattern.fullmatch(line))]
    assert len(steps) == len(lines) - 2  # every line between is a progress line
    assert [s for s in steps if s % 10 == 0] == [10, 20, 30, 40, 50, 60, 70, 80, 90]


def test_a_busy_server_is_tried_again_and_a_dead_one_named(
    serve_site: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = os.urandom(MiB)
    url = serve_site(Site(body, busy=1))
    path = resolve_model(f"{url}/m.onnx", tmp_path, cache_root=tmp_path / "cache", progress=False)
    assert path.read_bytes() == body
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"Download of {url}/m.onnx: HTTP 503 after 0 B; trying again in 0.5 s (try 2 of 4)"
    ]
    url = serve_site(Site(body, busy=4))
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"{url}/m.onnx", tmp_path, cache_root=tmp_path / "cache", progress=False)
    assert str(info.value) == (
        f"Cannot download the model {url}/m.onnx: HTTP 503 after 0 B; gave up after 4 tries in a row without progress."
    )


def test_a_terminal_gets_a_bar(serve_site: Any, tmp_path: Path) -> None:
    """stderr a real terminal (a pty): tqdm's bar, and no progress log lines."""
    import fcntl
    import struct
    import subprocess
    import sys
    import termios

    from tests.conftest import cli_env

    body = os.urandom(2 * MiB)
    url = serve_site(Site(body))
    code = (
        "import logging, sys; from pathlib import Path; from localserve.runtimes.sources import resolve_model\n"
        "log = logging.getLogger('localserve'); log.setLevel(logging.INFO)\n"
        "log.addHandler(logging.StreamHandler(sys.stdout))\n"
        f"resolve_model({url + '/m.onnx'!r}, Path({str(tmp_path)!r}), cache_root=Path({str(tmp_path / 'cache')!r}))\n"
    )
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal 120 columns wide
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            stderr=follower,
            stdout=subprocess.PIPE,
            env=cli_env(),
            timeout=120,
            check=False,
        )
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and everything was read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0, drawn.decode(errors="replace")
    screen = drawn.decode(errors="replace")
    assert f"{url}/m.onnx: 100%|" in screen and "2.00M/2.00M" in screen  # tqdm's bar, at its end
    logged = done.stdout.decode().splitlines()
    assert logged[0].startswith(f"Downloaded {url}/m.onnx (2.0 MiB) in "), logged  # no "Downloading ..." lines
    assert len(logged) == 1
