"""The project as the platform packaged it (seed 001): what user code sees as its working directory.

Cortex built each API's image from the project folder minus the config file, files and folders
starting with ``.`` (``.env`` aside), ``*.pyc``/``*.pyo``/``*.pyd``, ``__pycache__`` and what
``.cortexignore`` lists; code that reads an excluded file worked locally and broke once deployed.
localserve mirrors the packaged files into a temporary folder (real folders, a symbolic link per
file, so nothing large is copied) and runs user code there; ``--raw-project`` turns it off.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path

from localserve.ignore import IgnoreRules, builtin_patterns, user_patterns

log = logging.getLogger("localserve")


def excluded_files(project: Path, config_file: Path | None) -> list[str]:
    """The project's paths (POSIX, relative; folders end with '/') that are not packaged, in walk order."""
    return _walk(project.resolve(), config_file, None)


def packaged_view(project: Path, config_file: Path | None) -> Path:
    """A temporary mirror of the packaged files of ``project``, removed when the process exits."""
    root = Path(tempfile.mkdtemp(prefix="localserve-project-"))
    atexit.register(shutil.rmtree, root, True)
    excluded = _walk(project.resolve(), config_file, root)
    if excluded:
        shown = ", ".join(excluded[:8]) + (f" and {len(excluded) - 8} more" if len(excluded) > 8 else "")
        log.info("user code sees the project as packaged, without %s (--raw-project to see everything)", shown)
    return root


def _walk(project: Path, config_file: Path | None, mirror: Path | None) -> list[str]:
    rules = IgnoreRules(builtin_patterns(project, config_file) + user_patterns(project))
    excluded: list[str] = []
    for folder, dirs, files in os.walk(project):
        relative_folder = Path(folder).relative_to(project).as_posix()
        prefix = "" if relative_folder == "." else relative_folder + "/"
        kept_dirs = []
        for name in sorted(dirs):
            path = Path(folder) / name
            if rules.match(prefix + name, True):
                excluded.append(prefix + name + "/")
            elif path.is_symlink():
                files.append(name)  # a linked folder: linked as a whole, not walked
            else:
                kept_dirs.append(name)
                if mirror is not None:
                    (mirror / prefix / name).mkdir()
        dirs[:] = kept_dirs
        for name in sorted(files):
            if rules.match(prefix + name, (Path(folder) / name).is_dir()):
                excluded.append(prefix + name)
            elif mirror is not None:
                os.symlink(Path(folder) / name, mirror / prefix / name)
    return excluded
