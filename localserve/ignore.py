"""Which project files are packaged: seed 001's exclusions plus ``.cortexignore`` / ``.localserveignore``.

Example::

    is_ignored = ignored(Path("iris-classifier"), Path("iris-classifier/cortex.yaml"))
    is_ignored(Path("iris-classifier/__pycache__/handler.cpython-311.pyc"))   # True

Not packaged (seed 001): the API config file, files and folders whose name starts with
``.`` (except the project's ``.env``, which must reach the container to be exported),
``*.pyc``, ``*.pyo``, ``*.pyd``, ``__pycache__``, and what the ignore files list, read with
gitignore semantics: ``#`` comments, ``!`` negation, ``dir/`` for folders only, ``/x``
anchored at the project, ``*``, ``?``, ``[a-z]`` and ``**``. As in git, nothing inside an
ignored folder can be re-included.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["IGNORE_FILES", "IgnoreRules", "Rule", "builtin_patterns", "ignored", "parse_ignore_lines"]

IGNORE_FILES = (".cortexignore", ".localserveignore")
KEPT_HIDDEN = (".env",)


@dataclass(frozen=True)
class Rule:
    """One gitignore line."""

    pattern: str  # as written, without '!' and the trailing '/'
    negated: bool
    dir_only: bool
    anchored: bool  # has a '/' before its end: matched against the whole relative path
    regex: re.Pattern[str]

    def matches(self, relative: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        subject = relative if self.anchored else relative.rsplit("/", 1)[-1]
        return self.regex.fullmatch(subject) is not None


def parse_ignore_lines(lines: Iterable[str]) -> list[Rule]:
    """gitignore lines to rules; blank lines and comments are skipped."""
    rules = []
    for raw in lines:
        line = raw.rstrip("\n").rstrip("\r")
        if not line.endswith("\\ "):
            line = line.rstrip(" \t")
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated or line.startswith(("\\!", "\\#")):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        body = line.lstrip("/")
        rules.append(Rule(line, negated, dir_only, anchored, re.compile(_glob_to_regex(body))))
    return rules


def _glob_to_regex(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i) and i + 2 == n and (i == 0 or pattern[i - 1] == "/"):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 2 if pattern.startswith(("[!", "[^"), i) else i + 1)
            if end == -1:
                out.append(re.escape("["))
                i += 1
                continue
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif pattern[i] == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def builtin_patterns(project: Path, config_file: Path | None) -> list[str]:
    """Seed 001's exclusions as gitignore lines (the config file only when it lies in the project)."""
    patterns = []
    if config_file is not None:
        path = config_file if config_file.is_absolute() else project / config_file
        try:
            relative = path.resolve().relative_to(project.resolve())
        except ValueError:
            relative = None
        if relative is not None:
            patterns.append("/" + relative.as_posix())
    patterns += [".*", *(f"!/{name}" for name in KEPT_HIDDEN), "*.pyc", "*.pyo", "*.pyd", "__pycache__/"]
    return patterns


def user_patterns(project: Path) -> list[str]:
    """The lines of the project's ignore files, in IGNORE_FILES order."""
    lines: list[str] = []
    for name in IGNORE_FILES:
        path = project / name
        if path.is_file():
            lines += path.read_text(encoding="utf-8").splitlines()
    return lines


class IgnoreRules:
    """An ordered list of rules; the last rule matching a path decides, and an ignored folder hides its contents."""

    def __init__(self, rules: list[Rule]) -> None:
        self.rules = rules

    def match(self, relative: str, is_dir: bool) -> bool:
        """Whether ``relative`` (a POSIX path relative to the project) is ignored."""
        parts = [p for p in relative.strip("/").split("/") if p not in ("", ".")]
        for depth in range(1, len(parts) + 1):
            last = depth == len(parts)
            if self._decide("/".join(parts[:depth]), is_dir if last else True):
                return True
        return False

    def _decide(self, relative: str, is_dir: bool) -> bool:
        result = False
        for rule in self.rules:
            if rule.matches(relative, is_dir):
                result = not rule.negated
        return result


def ignored(project: Path, config_file: Path | None) -> Callable[[Path], bool]:
    """A predicate telling whether a path (absolute, or relative to ``project``) is left out of the package."""
    root = project.resolve()
    rules = IgnoreRules(parse_ignore_lines(builtin_patterns(project, config_file) + user_patterns(project)))

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
