"""User modules across ``Project`` contexts: each entry imports the project's code afresh, as a new process would.

Two projects of one test session may both have ``main.py``. Python caches a module by its name,
so the second project's ``import main`` would get the first one's. On entry the modules that the
project's own files shadow (same top-level name, a file elsewhere) are set aside; on exit what the
project imported is let go and what was set aside is put back.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

__all__ = ["is_ours", "put_back", "set_aside_shadowed", "top_level_names"]

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
