"""The project as the platform packaged it (Cortex 0.25-0.33 docs, *Predictors*): user code's working directory.

Code that reads a file the packaging left out (``project.ignore``) works locally and breaks once deployed, so user code
runs in a temporary mirror of the packaged files (real folders, a symbolic link per file, nothing large copied);
``--raw-project`` turns it off.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path

from localserve.project.ignore import packaging_rules

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


def sync_view(project: Path, config_file: Path | None, mirror: Path) -> None:
    """Bring the mirror ``packaged_view`` made up to date: links for files added, none for files gone or now ignored.

    The bytecode Python wrote in the mirror (``__pycache__``) stays.
    """
    project = project.resolve()
    wanted = _packaged(project, config_file)
    _prune(mirror, wanted)
    for relative, is_folder in wanted.items():  # parents come before their contents (walk order)
        target = mirror / relative
        if is_folder:
            target.mkdir(exist_ok=True)
        elif not target.is_symlink():
            os.symlink(project / relative, target)


def _prune(mirror: Path, wanted: dict[str, bool]) -> None:
    """Remove from the mirror what is no longer packaged (``__pycache__`` aside)."""
    for folder, dirs, files in os.walk(mirror):
        prefix = Path(folder).relative_to(mirror).as_posix() + "/"
        prefix = "" if prefix == "./" else prefix
        for name in list(dirs):
            path = Path(folder) / name
            if path.is_symlink():  # a linked folder is a file of the mirror
                dirs.remove(name)
                files.append(name)
            elif wanted.get(prefix + name) is not True:
                dirs.remove(name)
                if name != "__pycache__":
                    shutil.rmtree(path, ignore_errors=True)
        for name in files:
            if wanted.get(prefix + name) is not False:
                os.unlink(Path(folder) / name)


def _packaged(project: Path, config_file: Path | None) -> dict[str, bool]:
    """The packaged paths of ``project`` (relative, POSIX) in walk order: True for a folder, False for a file or link."""
    rules = packaging_rules(project, config_file)
    wanted: dict[str, bool] = {}
    for folder, dirs, files in os.walk(project):
        relative_folder = Path(folder).relative_to(project).as_posix()
        prefix = "" if relative_folder == "." else relative_folder + "/"
        kept_dirs = []
        for name in sorted(dirs):
            if rules.match(prefix + name, True):
                continue
            if (Path(folder) / name).is_symlink():
                wanted[prefix + name] = False  # a linked folder: linked as a whole
            else:
                wanted[prefix + name] = True
                kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in sorted(files):
            if not rules.match(prefix + name, (Path(folder) / name).is_dir()):
                wanted[prefix + name] = False
    return wanted


def _walk(project: Path, config_file: Path | None, mirror: Path | None) -> list[str]:
    rules = packaging_rules(project, config_file)
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
