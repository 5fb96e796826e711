"""Imports flow one way (docs/architecture.md): no import cycle between localserve's modules, counting the
imports inside functions and under ``TYPE_CHECKING``; an import inside a function is for a heavy dependency
only, and says which on its line or just above (``# lazy: <reason>``).

Read from the AST of every module of the package, so a cycle hidden in a function or a type-only import
counts as much as one at the top of a module (import-linter's layers see the packages; this sees the modules).

What ``import localserve`` loads is checked in a fresh Python: this session has imported everything.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import cli_env

ROOT = Path(__file__).resolve().parents[1]

PACKAGE = Path(__file__).resolve().parents[1] / "localserve"
# What an in-function import may put off: each pulls one of these (or a package that imports one).
HEAVY = ("numpy", "onnxruntime", "tensorflow", "grpc", "boto3", "redis", "opentelemetry", "httpx")
MAX_IN_FUNCTION = 15
LAZY = re.compile(r"#\s*lazy:\s*(.+)")
# Cycles and in-function imports that live in the engine's callers being rewritten (engine/, protocols/,
# handlers/__init__.py): known, and to be emptied; one fixed must leave this list too.
KNOWN_CYCLES: list[list[str]] = []
KNOWN_IN_FUNCTION: list[str] = []  # "path:line module", relative to the repository


@dataclass(frozen=True)
class InFunction:
    """An import of a localserve module inside a function: where, what, and its ``# lazy:`` reason."""

    path: str
    line: int
    module: str
    reason: str | None

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.module}"


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(node: ast.Import | ast.ImportFrom, module: str, path: Path) -> list[str]:
    """The dotted names an import statement reaches (``from a import b``: ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, base] if base else package)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module that importing ``name`` runs (``a.b.attr``: ``a.b``); None outside the package."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(known: dict[str, Path], root: Path = PACKAGE.parent) -> tuple[dict[str, set[str]], list[InFunction]]:
    """Each module's imports of other modules of the package (every statement: top, function, TYPE_CHECKING);
    and the in-function ones with their reasons."""
    graph: dict[str, set[str]] = {}
    in_function: dict[tuple[str, int], InFunction] = {}
    for module, path in known.items():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, str(path))
        lines = text.splitlines()
        graph[module] = {
            target
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for name in _imported(node, module, path)
            if (target := _resolve(name, known)) is not None and target != module
        }
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                targets = [t for name in _imported(node, module, path) if (t := _resolve(name, known))]
                if targets:
                    where = str(path.relative_to(root))
                    found = InFunction(where, node.lineno, max(targets, key=len), _reason(lines, node))
                    in_function[(where, node.lineno)] = found
    return graph, sorted(in_function.values(), key=lambda f: (f.path, f.line))


def _reason(lines: list[str], node: ast.stmt) -> str | None:
    """The ``# lazy:`` reason on the statement's lines, or in the comments and imports just above it."""
    start, end = node.lineno - 1, node.end_lineno or node.lineno
    for text in lines[start:end]:
        if match := LAZY.search(text):
            return match.group(1).strip()
    index = start - 1
    while index >= 0 and lines[index].strip().startswith(("#", "from ", "import ")):
        if match := LAZY.search(lines[index]):
            return match.group(1).strip()
        index -= 1
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of more than one module that each reach the others through imports, each sorted; sorted."""
    reach = {module: _reachable(graph, module) for module in graph}
    groups = {frozenset(m for m in reach[v] if v in reach[m]) | {v} for v in graph}
    return sorted(sorted(group) for group in groups if len(group) > 1)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def test_the_finder_sees_cycles_through_functions_and_type_checking(tmp_path: Path) -> None:
    package = tmp_path / "localserve"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from localserve import high\n"
    )
    (package / "high.py").write_text("def f():\n    from localserve.low import thing  # lazy: numpy\n")
    (package / "alone.py").write_text("from . import high\n")
    graph, in_function = import_graph(modules(package), tmp_path)
    assert cycles(graph) == [["localserve.high", "localserve.low"]]
    assert graph["localserve.alone"] == {"localserve", "localserve.high"}
    assert [(f.module, f.reason) for f in in_function] == [("localserve.low", "numpy")]


def test_no_import_cycles() -> None:
    graph, _ = import_graph(modules())
    found = cycles(graph)
    assert [c for c in found if c not in KNOWN_CYCLES] == [], "import cycles (break each: see docs/architecture.md)"
    assert [c for c in KNOWN_CYCLES if c not in found] == [], "fixed: remove them from KNOWN_CYCLES"


def test_in_function_imports_are_for_heavy_dependencies_and_say_which() -> None:
    _, in_function = import_graph(modules())
    ours = [f for f in in_function if str(f) not in KNOWN_IN_FUNCTION]
    assert [str(f) for f in ours if f.reason is None] == [], "an in-function import needs '# lazy: <heavy dependency>'"
    assert [str(f) for f in ours if not any(h in (f.reason or "") for h in HEAVY)] == [], (
        f"a reason names one of {HEAVY}"
    )
    assert len(ours) <= MAX_IN_FUNCTION, "\n".join(map(str, ours))
    assert [k for k in KNOWN_IN_FUNCTION if k not in {str(f) for f in in_function}] == [], "fixed: remove them"


def test_the_cli_imports_none_of_what_its_in_function_imports_put_off() -> None:
    """Why the CLI's lazy imports are lazy: numpy starts threads, and serve's mount namespace needs none."""
    probe = f"import sys, localserve.cli, localserve.pytest_plugin; print(__import__('json').dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=cli_env(), check=True)
    assert json.loads(done.stdout) == []


def test_processes_end_in_the_cli_only() -> None:
    """``sys.exit``, ``os._exit`` and ``raise SystemExit`` below ``cli/`` would end a server from inside it; the
    layers below return how they ended (``processes.supervisor.Stopped``) and the CLI exits."""
    found = []
    for module, path in modules().items():
        if module.startswith("localserve.cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            call = node.exc if isinstance(node, ast.Raise) else node
            if isinstance(call, ast.Call):
                call = call.func
            if isinstance(call, ast.Name) and call.id == "SystemExit" and isinstance(node, ast.Raise):
                found.append(f"{module}:{node.lineno} SystemExit")
            elif isinstance(call, ast.Attribute) and (call.attr, getattr(call.value, "id", None)) in (
                ("exit", "sys"),
                ("_exit", "os"),
            ):
                found.append(f"{module}:{node.lineno} {call.value.id}.{call.attr}")  # type: ignore[attr-defined]
    assert sorted(set(found)) == []


def test_the_architecture_page_lists_every_module() -> None:
    """docs/explanation/architecture.md's module map names each module of the package, in its package."""
    page = (ROOT / "docs" / "explanation" / "architecture.md").read_text(encoding="utf-8")
    block = page.split("## Module map", 1)[1].split("```", 2)[1]
    listed: set[str] = set()
    parents: list[str] = []
    for line in block.splitlines():
        name = line.split()[0] if line.startswith("  ") else ""
        if not name:
            continue
        depth = (len(line) - len(line.lstrip())) // 2 - 1
        parents = parents[:depth]
        if name.endswith("/"):
            parents.append(name.rstrip("/"))
            listed.add(".".join(parents))
        else:
            listed.add(".".join([*parents, name.removesuffix(".py")]))
    package = ROOT / "localserve"
    expected = {
        ".".join(path.relative_to(package).with_suffix("").parts).removesuffix(".__init__")
        for path in package.rglob("*.py")
        if path.name != "__init__.py" or path.parent != package
    }
    expected = {name.removesuffix("__init__").rstrip(".") for name in expected} - {
        "",
        "protocols.v2.grpc.inference_pb2",
    }
    assert sorted(expected - listed) == [], (
        "modules missing from the module map (python scripts/module_map.py redraws it)"
    )
    assert sorted(listed - expected) == [], "the module map lists modules that are gone"


def test_the_modules_said_to_hold_no_behaviour_of_their_own_are_modules_without_a_test_file() -> None:
    """scripts/test_mirror.py's list stays true: each entry a module of the package, none with a mirrored test file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("test_mirror_script", ROOT / "scripts" / "test_mirror.py")
    assert spec is not None and spec.loader is not None
    mirror = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mirror)
    missing, total, stale = mirror.unmirrored()
    assert stale == []
    assert total == len(mirror.modules()) and len(missing) < total
    assert mirror.test_path(PACKAGE / "messages" / "payload.py") == ROOT / "tests" / "messages" / "test_payload.py"
