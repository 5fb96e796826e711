"""Modules over 300 lines and functions over 60 lines in localserve/, with the exceptions.

    python scripts/sizes.py          # lists what is over; exits 1 when anything is, but the exceptions

Lines are counted as in the file (docstrings and comments included). The exceptions are tables and
literals (a module that is mostly data, a function that is one literal): EXCEPTIONS names each, and why.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_MODULE = 300
MAX_FUNCTION = 60
ROOT = Path(__file__).resolve().parent.parent / "localserve"
# path relative to localserve/ (module) or "path:function": why it may be longer.
EXCEPTIONS: dict[str, str] = {}


def over(root: Path = ROOT) -> list[str]:
    """Every module and function over its limit and not excepted, as 'path: N lines' / 'path:function: N lines'."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > MAX_MODULE and name not in EXCEPTIONS:
            found.append(f"{name}: {lines} lines (module; at most {MAX_MODULE})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                key = f"{name}:{node.name}"
                if size > MAX_FUNCTION and key not in EXCEPTIONS:
                    found.append(f"{key}: {size} lines (function; at most {MAX_FUNCTION})")
    return found


if __name__ == "__main__":
    problems = over()
    print("\n".join(problems) or "every module and function is within its limit")
    sys.exit(1 if problems else 0)
