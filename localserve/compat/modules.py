"""Letting go of the modules user code imported, so that the next import reads the files afresh.

Example::

    forget_modules(before, ["/tmp/localserve-project-x/", "/home/me/proj/"], bytecode=True)

A module belongs to the ``sys.path`` folder nearest its file, so a virtualenv inside the project
keeps its packages. ``Project`` lets go of user code on exit (a second ``run`` in one process
imports it again, as a new process would) and on each reload of ``serve --reload``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from importlib.machinery import EXTENSION_SUFFIXES

log = logging.getLogger("localserve")


def _folder(path: str) -> str:
    return os.path.join(path, "")


def _owned(before: set[str], folders: Iterable[str]) -> dict[str, str]:
    """The modules imported since ``before`` whose nearest folder (of sys.path and ``folders``) is one of
    ``folders``: name -> file."""
    ours = {_folder(folder) for folder in folders}
    candidates = sorted({_folder(folder) for folder in sys.path if folder} | ours, key=len, reverse=True)
    owned: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        if name in before:
            continue
        file = getattr(module, "__file__", None) or ""
        nearest = next((folder for folder in candidates if file.startswith(folder)), None)
        if nearest in ours:
            owned[name] = file
    return owned


def forget_modules(before: set[str], folders: Iterable[str], *, bytecode: bool = False) -> list[str]:
    """Let go of the modules imported from ``folders`` since ``before``; their names.

    ``bytecode``: their cached ``.pyc`` goes too. Python trusts a ``.pyc`` whose source has the
    size and modification time (in whole seconds) it recorded, so an edit within the second that
    keeps the size would otherwise be read from the stale bytecode.
    """
    owned = _owned(before, folders)
    for name in owned:
        module = sys.modules.pop(name, None)
        cached = getattr(module, "__cached__", None)
        if bytecode and isinstance(cached, str):
            try:
                os.unlink(cached)
            except OSError:
                pass
    return sorted(owned)


def forget_installed(before: set[str], folders: Iterable[str]) -> list[str]:
    """Let go of the packages imported from requirement folders that were replaced; the packages kept.

    A package with native code (an extension module) cannot be imported twice in one process, so
    it stays as it was loaded, and the names of such packages are returned for a warning.
    """
    packages: dict[str, dict[str, str]] = {}
    for name, file in _owned(before, folders).items():
        packages.setdefault(name.partition(".")[0], {})[name] = file
    kept = []
    for package, modules in sorted(packages.items()):
        if any(file.endswith(tuple(EXTENSION_SUFFIXES)) for file in modules.values()):
            kept.append(package)
            continue
        for name in modules:
            sys.modules.pop(name, None)
    return kept
