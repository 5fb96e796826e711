"""Which project files are packaged: what Cortex packaged plus ``.cortexignore`` / ``.localserveignore``.

Example::

    is_ignored = ignored(Path("iris-classifier"), Path("iris-classifier/cortex.yaml"))
    is_ignored(Path("iris-classifier/__pycache__/handler.cpython-311.pyc"))   # True

Not packaged (Cortex 0.25-0.33 docs, *Predictors*): the API config file, names starting with ``.`` (but the project's
``.env``, which must reach the container), ``*.pyc``, ``*.pyo``, ``*.pyd``, ``__pycache__``, and what the ignore files
list, with gitignore semantics (pathspec): nothing inside an ignored folder can be re-included, and a pattern git would
refuse is a ConfigError naming the file and line. A project without ignore files has Cortex's exclusions alone, which
``CortexRules`` matches by name: pathspec, whose import is a noticeable part of a start, is imported for ignore files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from localserve.errors import ConfigError

__all__ = [
    "IGNORE_FILES",
    "CortexRules",
    "IgnoreRules",
    "Rule",
    "builtin_patterns",
    "editor_temp",
    "ignored",
    "packaging_rules",
    "parse_ignore_lines",
    "user_patterns",
]

IGNORE_FILES = (".cortexignore", ".localserveignore")
KEPT_HIDDEN = (".env",)


@dataclass(frozen=True)
class Rule:
    """One gitignore line, as ``export dockerignore`` rewrites it."""

    pattern: str  # as written, without '!' and the trailing '/'
    negated: bool
    dir_only: bool
    anchored: bool  # has a '/' before its end: matched against the whole relative path


def parse_ignore_lines(lines: Iterable[str], source: str = "ignore rules") -> list[Rule]:
    """gitignore lines to rules (blank lines and comments skipped); a bad pattern is a ConfigError naming its line."""
    import pathspec  # lazy: pathspec, for ignore files only (see the module's text)

    rules = []
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n").rstrip("\r")
        try:
            spec = pathspec.GitIgnoreSpec.from_lines([line])
        except (ValueError, re.error) as exc:  # pathspec's pattern errors; re's for a range such as [z-a]
            # re's position would be in pathspec's regex, not in the line: its message alone
            why = exc.msg if isinstance(exc, re.error) else str(exc)
            raise ConfigError(f"{source}, line {number}: invalid pattern {raw!r} ({why}); {_PATTERN_HELP}") from None
        if not spec.patterns or all(p.include is None for p in spec.patterns):
            continue  # blank, comment, or a pattern that matches nothing
        if not line.endswith("\\ "):
            line = line.rstrip(" \t")
        negated = line.startswith("!")
        if negated or line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        rules.append(Rule(line, negated, dir_only, "/" in line))
    return rules


_PATTERN_HELP = "expected gitignore syntax: *, ?, [a-z], ** and a trailing / for folders, \\ to escape a character."


def builtin_patterns(project: Path, config_file: Path | None) -> list[str]:
    """Cortex's exclusions as gitignore lines (the config file only when it lies in the project)."""
    config = _config_in(project, config_file)
    patterns = [] if config is None else ["/" + config]
    patterns += [".*", *(f"!/{name}" for name in KEPT_HIDDEN), *(f"*{suffix}" for suffix in _COMPILED), "__pycache__/"]
    return patterns


def _config_in(project: Path, config_file: Path | None) -> str | None:
    """The config file's path relative to ``project`` (POSIX), or None when there is none or it lies elsewhere."""
    if config_file is None:
        return None
    path = config_file if config_file.is_absolute() else project / config_file
    try:
        return path.resolve().relative_to(project.resolve()).as_posix()
    except ValueError:
        return None


_COMPILED = (".pyc", ".pyo", ".pyd")


def user_patterns(project: Path) -> list[str]:
    """The lines of the project's ignore files, in IGNORE_FILES order; each is checked (file and line on error)."""
    lines: list[str] = []
    for name in IGNORE_FILES:
        path = project / name
        if path.is_file():
            file_lines = path.read_text(encoding="utf-8").splitlines()
            parse_ignore_lines(file_lines, name)
            lines += file_lines
    return lines


# What editors write beside a file as they save it, then rename or delete (hidden ones are ``.*`` already):
# sed -i's sedXXXXXX, vim's 4913 probe, backups (name~), emacs' #name#, JetBrains' name___jb_tmp___.
_EDITOR_TEMP = re.compile(r"sed[A-Za-z0-9]{6}|4913|.+~|#.*#|.+___jb_(tmp|old)___")


def editor_temp(name: str) -> bool:
    """Whether a file ``name`` is an editor's temporary or backup file, which ``serve --reload`` never counts."""
    return _EDITOR_TEMP.fullmatch(name) is not None


class IgnoreRules:
    """gitignore lines; the last matching line decides, and an ignored folder hides its contents."""

    def __init__(self, lines: list[str]) -> None:
        import pathspec  # lazy: pathspec, for ignore files only (see the module's text)

        parse_ignore_lines(lines)
        self.spec = pathspec.GitIgnoreSpec.from_lines(lines)

    def match(self, relative: str, is_dir: bool) -> bool:
        """Whether ``relative`` (a POSIX path relative to the project) is ignored."""
        parts = [p for p in relative.strip("/").split("/") if p not in ("", ".")]
        for depth in range(1, len(parts) + 1):
            last = depth == len(parts)
            candidate = "/".join(parts[:depth]) + ("/" if (is_dir or not last) else "")
            if self.spec.match_file(candidate):
                return True
        return False


class CortexRules:
    """``builtin_patterns`` alone, matched by name as git matches them: the config file, hidden names but the project's
    ``.env``, compiled Python and ``__pycache__`` folders, and whatever lies inside one of these."""

    def __init__(self, project: Path, config_file: Path | None) -> None:
        self.config = _config_in(project, config_file)

    def match(self, relative: str, is_dir: bool) -> bool:
        """Whether ``relative`` (a POSIX path relative to the project) is ignored."""
        parts = [p for p in relative.strip("/").split("/") if p not in ("", ".")]
        config = self.config
        if config is not None and ((path := "/".join(parts)) == config or path.startswith(config + "/")):
            return True
        for depth, name in enumerate(parts):
            if name.endswith(_COMPILED) or (name == "__pycache__" and (is_dir or depth < len(parts) - 1)):
                return True
            if name.startswith(".") and not (depth == 0 and name in KEPT_HIDDEN):  # "!/.env" keeps .env, not .env/.x
                return True
        return False


def packaging_rules(project: Path, config_file: Path | None) -> IgnoreRules | CortexRules:
    """What is left out of the package: Cortex's exclusions and the project's ignore files' lines (``IgnoreRules``),
    or Cortex's alone when there are none (``CortexRules``)."""
    lines = user_patterns(project)
    if not lines:
        return CortexRules(project, config_file)
    return IgnoreRules(builtin_patterns(project, config_file) + lines)


def ignored(project: Path, config_file: Path | None) -> Callable[[Path], bool]:
    """A predicate telling whether a path (absolute, or relative to ``project``) is left out of the package."""
    root = project.resolve()
    rules = packaging_rules(project, config_file)

    def is_ignored(path: Path) -> bool:
        absolute = path if path.is_absolute() else root / path
        if absolute.is_relative_to(root):
            relative = absolute.relative_to(root)
        elif absolute.resolve().is_relative_to(root):
            relative = absolute.resolve().relative_to(root)
        else:
            raise ValueError(f"{path} is not inside the project {root}")
        return rules.match(relative.as_posix(), absolute.is_dir())

    return is_ignored
