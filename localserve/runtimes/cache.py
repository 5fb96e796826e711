"""The model cache's files and folders, never half-written where they would be used: a download is written
to a temporary name in the same folder, fsynced and renamed; a folder is built in a staging folder and
renamed. Also the cache's keys and the model folder inside an unpacked one (progress: ``progress``)."""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from localserve.errors import ModelLoadError
from localserve.runtimes.progress import download_progress, human_size

logger = logging.getLogger("localserve")

CHUNK = 1024 * 1024
_scratch: list[Path] = []


def scratch_dir() -> Path:
    """The cache folder of a process that was given none (``ServeOptions.cache_dir`` None: an App built
    without the CLI, which decides the real one): a temporary folder, made on first use, removed at exit."""
    if not _scratch:
        _scratch.append(Path(tempfile.mkdtemp(prefix="localserve-cache-")))
        atexit.register(shutil.rmtree, _scratch[0], ignore_errors=True)
    return _scratch[0]


def model_root(folder: Path) -> Path:
    """The folder itself, or its single sub-folder when that one is a SavedModel (zips often wrap one)."""
    if (folder / "saved_model.pb").is_file():
        return folder
    entries = [p for p in folder.iterdir() if p.name != "__MACOSX"]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / "saved_model.pb").is_file():
        return entries[0]
    return folder


def download(chunks: Iterable[bytes], target: Path, total: int | None, label: str, show_bar: bool) -> None:
    """Write ``chunks`` into ``target`` atomically; a short or broken stream raises and leaves nothing behind.

    Progress goes to a bar (``show_bar``) or to log lines (``progress``); an exception from ``chunks``
    (a failed checksum at its end included) leaves no file.
    """
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    started = time.monotonic()
    done = 0
    progress = download_progress(label, total, bar=show_bar)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                if chunk is RESTART:  # the source starts again from its first byte
                    out.seek(0)
                    out.truncate()
                    done = 0
                    continue
                out.write(chunk)
                done += len(chunk)
                progress.update(done)
            out.flush()
            os.fsync(out.fileno())
        if total is not None and done != total:
            raise ModelLoadError(f"Download of {label} was interrupted: got {done} of {total} bytes.")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        progress.close()
    seconds = time.monotonic() - started
    logger.info("Downloaded %s (%s) in %.1fs to %s", label, human_size(done), seconds, target)


class _Restart(bytes):
    pass


RESTART = _Restart()  # yielded by a source of ``download`` that starts again from its first byte (compared by identity)


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


def cache_key(*parts: str) -> str:
    """A cache folder's key: a digest of the location and its validator (ETag, Last-Modified)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def safe_name(name: str) -> str:
    """A remote file's name fit for the cache folder ("model" when it is empty or a path)."""
    return name if name not in ("", ".", "..") and "/" not in name and "\\" not in name else "model"
