"""Long docstrings and measured figures in localserve/'s code.

    python scripts/docstrings.py          # what is over; exits 1 when anything is
    python scripts/docstrings.py --all 5  # every docstring over 5 lines, modules' too, and the figures; exits 0

A function's or a class's docstring says what and why in a few lines (MAX_DOCSTRING); a module's may be its
reference (a state table, a protocol's rules), up to MAX_MODULE. A measured figure (req/s, µs, ms, "measured
on", "3x faster") belongs in benchmarks/README.md, never in a docstring or a comment: the code keeps the reason.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

MAX_DOCSTRING = 5
MAX_MODULE = 20
ROOT = Path(__file__).resolve().parent.parent / "localserve"
GENERATED = re.compile(r"_pb2(_grpc)?\.pyi?$")
# A number with a unit of time or rate (not a literal in ``backquotes``), a ratio ("3x", "1.5\u00d7"), or the
# words that introduce a measurement.
FIGURE = re.compile(
    r"(?<![`\w.,])\d(?:[\d,.]*\d)?\s?(?:req/s|rps|ns|us|\u00b5s|ms)\b"
    r"|\b\d+(?:\.\d+)?\s?[x\u00d7](?![\w-])"
    r"|\bmeasured(?::| (?:with|on|at|together)\b)",
    re.IGNORECASE,
)


def prose(doc: str) -> list[str]:
    """A docstring's lines of text: not blank, not an example (an indented block after ``::``, or click's ``\\b``)."""
    lines: list[str] = []
    block = ""  # "indented" after a line ending in "::", "click" after click's mark, until the block ends
    for line in doc.splitlines():
        if block == "click" or (block == "indented" and (not line.strip() or line.startswith(" "))):
            block = "" if block == "click" and not line.strip() else block
            continue
        block = ""
        if line.strip() == "\b":  # click's mark (a backspace) before a paragraph it must not rewrap
            block = "click"
        elif line.strip():
            lines.append(line)
            block = "indented" if line.rstrip().endswith("::") else ""
    return lines


def _docstrings(tree: ast.Module) -> list[tuple[str, int, str, str]]:
    """(kind, line, name, text) of the module's docstring and every class's and function's."""
    found = []
    if (doc := ast.get_docstring(tree)) is not None:
        found.append(("module", 1, "", doc))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and (doc := ast.get_docstring(node)) is not None
        ):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            found.append((kind, node.body[0].lineno, node.name, doc))
    return found


def _comments(text: str) -> list[tuple[int, str]]:
    """Every comment, and every string that stands alone as a statement (a comment in all but name)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    found = [(token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        for statement in body[1:] if isinstance(body, list) else []:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):  # noqa: SIM102
                if isinstance(statement.value.value, str):
                    found.append((statement.lineno, statement.value.value))
    return found


def _sources(root: Path) -> list[tuple[str, str]]:
    paths = sorted(path for path in root.rglob("*.py") if not GENERATED.search(path.name))
    return [(path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")) for path in paths]


def long_docstrings(root: Path = ROOT, limit: int = MAX_DOCSTRING, module_limit: int = MAX_MODULE) -> list[str]:
    """Every docstring over its limit: ``limit`` lines for a function's or class's, ``module_limit`` for a module's."""
    found = []
    for name, text in _sources(root):
        for kind, line, what, doc in _docstrings(ast.parse(text)):
            most = module_limit if kind == "module" else limit
            if (size := len(prose(doc))) > most:
                found.append(
                    f"{name}:{line}: {kind} {what} docstring: {size} lines (at most {most})".replace("  ", " ")
                )
    return found


def figures(root: Path = ROOT) -> list[str]:
    """Every docstring and comment that carries a measured figure, with the words that matched."""
    found = []
    for name, text in _sources(root):
        places = [(line, "\n".join(prose(doc))) for _, line, _, doc in _docstrings(ast.parse(text))] + _comments(text)
        for line, words in sorted(places):
            if hits := [" ".join(hit.split()) for hit in FIGURE.findall(words)]:
                found.append(
                    f"{name}:{line}: a measured figure ({', '.join(hits)}): it belongs in benchmarks/README.md"
                )
    return found


def main(argv: list[str]) -> int:
    if argv[:1] == ["--all"]:
        limit = int(argv[1]) if len(argv) > 1 else MAX_DOCSTRING
        listed, seen = long_docstrings(limit=limit, module_limit=limit), figures()
        print("\n".join([*listed, *seen]))
        print(f"{len(listed)} docstrings over {limit} lines; {len(seen)} docstrings or comments with a figure")
        return 0
    problems = long_docstrings() + figures()
    print(
        "\n".join(problems)
        or f"no docstring over its limit ({MAX_DOCSTRING} lines, {MAX_MODULE} a module's), no figure"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
