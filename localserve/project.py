"""The project directory: cwd and sys.path, .env, requirements installed into a cached folder."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of localserve's caches: $LOCALSERVE_CACHE_DIR, else $XDG_CACHE_HOME/localserve, else ~/.cache/localserve."""
    explicit = os.environ.get("LOCALSERVE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "localserve"
