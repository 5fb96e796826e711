"""The model cache's files and folders, never half-written where they would be used: a download is written
to a temporary name in the same folder, fsynced and renamed; a folder is built in a staging folder and
renamed. Also the cache's keys, the model folder inside an unpacked one, and the progress bar."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from localserve.errors import ModelLoadError

logger = logging.getLogger("localserve")

CHUNK = 1024 * 1024


def model_root(folder: Path) -> Path:
    """The folder itself, or its single sub-folder when that one is a SavedModel (zips often wrap one)."""
    if (folder / "saved_model.pb").is_file():
        return folder
    entries = [p for p in folder.iterdir() if p.name != "__MACOSX"]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / "saved_model.pb").is_file():
        return entries[0]
    return folder


def download(read: Callable[[int], bytes], target: Path, total: int | None, label: str, show_bar: bool) -> None:
    """Stream ``read`` into ``target`` atomically; a short or broken stream raises and leaves nothing behind."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    started = time.monotonic()
    done = 0
    bar = _Bar(label, total) if show_bar else None
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                for chunk in _chunks(read, label):
                    out.write(chunk)
                    done += len(chunk)
                    if bar is not None:
                        bar.update(done)
            except _Truncated:
                if total is None:
                    raise ModelLoadError(f"Download of {label} was interrupted after {done} bytes.") from None
            out.flush()
            os.fsync(out.fileno())
        if total is not None and done != total:
            raise ModelLoadError(f"Download of {label} was interrupted: got {done} of {total} bytes.")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if bar is not None:
            bar.close()
    seconds = time.monotonic() - started
    logger.info("Downloaded %s (%s) in %.1fs to %s", label, _size(done), seconds, target)


def _chunks(read: Callable[[int], bytes], label: str) -> Iterator[bytes]:
    """Chunks of ``read`` until the end; _Truncated when the stream is cut short."""
    import http.client

    while True:
        try:
            chunk = read(CHUNK)
        except http.client.IncompleteRead:
            raise _Truncated from None
        except (OSError, http.client.HTTPException) as exc:
            raise ModelLoadError(f"Download of {label} was interrupted: {exc}.") from None
        if not chunk:
            return
        yield chunk


class _Truncated(Exception):
    pass


@contextmanager
def staging_dir(parent: Path, target: Path) -> Iterator[Path]:
    """A temporary folder beside ``target``, renamed to it on success and removed on failure."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=parent))
    try:
        yield staging
        try:
            os.rename(staging, target)
        except OSError:
            if not target.is_dir():  # not another replica that finished first
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


class _Bar:
    """A one-line progress bar on stderr."""

    def __init__(self, label: str, total: int | None, stream: IO[str] | None = None) -> None:
        self.label, self.total, self.stream = label, total, stream or sys.stderr
        self.last = 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.1 and done != self.total:
            return
        self.last = now
        if self.total:
            filled = int(30 * done / self.total)
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {_size(done)}/{_size(self.total)}")
        else:
            self.stream.write(f"\r{self.label} {_size(done)}")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def cache_key(*parts: str) -> str:
    """A cache folder's key: a digest of the location and its validator (ETag, Last-Modified)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def safe_name(name: str) -> str:
    """A remote file's name fit for the cache folder ("model" when it is empty or a path)."""
    return name if name not in ("", ".", "..") and "/" not in name and "\\" not in name else "model"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
