"""User modules across ``Project`` contexts and reloads: imported afresh, as a new process would import them.

Example::

    aside = set_aside_shadowed(folders, own)            # on entry: another project's `main` set aside
    forget_modules(before, ["/tmp/localserve-project-x/", "/home/me/proj/"], bytecode=True)
    put_back(aside)                                      # on exit

Python caches a module by name, so a second project's ``import main`` would get the first's: on entry (and each reload)
the modules the project's files shadow are set aside, and put back on exit. A module belongs to the ``sys.path`` folder
nearest its file (a virtualenv inside the project keeps its packages). User code is let go on exit and on each reload;
localserve's own modules never are, even from a checkout.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType

__all__ = ["forget_installed", "forget_modules", "is_ours", "put_back", "set_aside_shadowed", "top_level_names"]

log = logging.getLogger("localserve")

_KEPT = frozenset({"localserve", "cortex_internal", "__main__"})  # ours, whatever a project holds


def is_ours(name: str) -> bool:
    """Whether module ``name`` is localserve's own (never set aside nor let go, even from a checkout as project)."""
    return name.partition(".")[0] in _KEPT


def top_level_names(folder: str | Path) -> set[str]:
    """The module names ``folder`` provides when it is on sys.path: ``name.py`` and packages (``name/__init__.py``)."""
    names: set[str] = set()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return names
    for entry in entries:
        stem, suffix = os.path.splitext(entry.name)
        if suffix == ".py" and stem.isidentifier():
            names.add(stem)
        elif entry.name.isidentifier() and os.path.isfile(os.path.join(entry.path, "__init__.py")):
            names.add(entry.name)
    return names - _KEPT


def set_aside_shadowed(folders: Iterable[str | Path], own: Iterable[str | Path]) -> dict[str, ModuleType]:
    """Take out of ``sys.modules`` the modules whose top-level name a file of ``folders`` provides but whose
    file is not under ``own`` (the project's folders); returns them for ``put_back``."""
    names = set().union(*(top_level_names(folder) for folder in folders))
    prefixes = tuple(os.path.join(str(folder), "") for folder in own)
    aside: dict[str, ModuleType] = {}
    for name, module in list(sys.modules.items()):
        top = name.partition(".")[0]
        if top not in names or top in sys.builtin_module_names:  # a built-in module is found before any file
            continue
        file = getattr(module, "__file__", None)
        if not file or not str(file).startswith(prefixes):
            aside[name] = sys.modules.pop(name)
    return aside


def put_back(aside: dict[str, ModuleType]) -> None:
    """Undo ``set_aside_shadowed``: each module back under its name, replacing what was imported meanwhile."""
    sys.modules.update(aside)


def _folder(path: str) -> str:
    return os.path.join(path, "")


def _owned(before: set[str], folders: Iterable[str]) -> dict[str, str]:
    """The modules imported since ``before`` whose nearest folder (of sys.path and ``folders``) is one of
    ``folders``: name -> file."""
    ours = {_folder(folder) for folder in folders}
    candidates = sorted({_folder(folder) for folder in sys.path if folder} | ours, key=len, reverse=True)
    owned: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        if name in before or is_ours(name):
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
