"""Print the module map of docs/explanation/architecture.md: every module of the package, with its docstring's first sentence.

python scripts/module_map.py   # paste between the map's fences (tests/test_layers.py checks the names)
"""

from __future__ import annotations

import ast
import pathlib

root = pathlib.Path(__file__).resolve().parents[1] / "localserve"
lines = ["localserve/"]


def doc(p):
    try:
        d = ast.get_docstring(ast.parse(p.read_text())) or ""
    except Exception:
        d = ""
    first = " ".join(d.strip().split("\n\n")[0].split())
    first = first.split(". ")[0].rstrip(".")
    return first


def walk(d, depth):
    entries = sorted(d.iterdir(), key=lambda p: (p.is_dir(), p.name))
    for p in entries:
        if p.name.startswith("__pycache__") or p.name.startswith("."):
            continue
        ind = "  " * depth
        if p.is_dir():
            if not (p / "__init__.py").exists():
                continue
            text = doc(p / "__init__.py")
            name = f"{ind}{p.name}/"
            lines.append(f"{name:<28}{text[:92]}" if text else name)
            walk(p, depth + 1)
        elif p.suffix == ".py" and p.name != "__init__.py" and not p.name.endswith("_pb2.py"):
            text = doc(p)
            name = f"{ind}{p.name}"
            lines.append(f"{name:<28}{text[:92]}")


walk(root, 1)
print("\n".join(lines))
