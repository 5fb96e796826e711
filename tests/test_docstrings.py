"""scripts/docstrings.py: docstrings over their limit and measured figures in code are found, and localserve has none."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("docstrings", ROOT / "scripts" / "docstrings.py")
assert _spec is not None and _spec.loader is not None
docstrings = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docstrings)

SIX = "\n    ".join(f"Line {n}." for n in range(2, 7))
FIVE = "\n    ".join(f"Line {n}." for n in range(2, 6))


def package(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_a_function_or_class_docstring_over_five_lines_of_text_is_listed(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        **{
            "long_function.py": f'def f():\n    """Line 1.\n\n    {SIX}\n    """\n',
            "long_class.py": f'class C:\n    """Line 1.\n\n    {SIX}\n    """\n',
            "short.py": f'def g():\n    """Line 1.\n\n    {FIVE}\n    """\n',
        },
    )
    assert docstrings.long_docstrings(root) == [
        "long_class.py:2: class C docstring: 6 lines (at most 5)",
        "long_function.py:2: function f docstring: 6 lines (at most 5)",
    ]


def test_examples_and_blank_lines_are_not_counted_and_a_module_has_a_limit_of_its_own(tmp_path: Path) -> None:
    example = "Run it.\n\nExample::\n\n    a = 1\n\n    b = 2\n\n\b\nlocalserve run\nlocalserve serve\n\nDone."
    long_module = "\n".join(f"Line {n}." for n in range(1, docstrings.MAX_MODULE + 2))
    root = package(
        tmp_path,
        **{
            "example.py": 'def f():\n    """' + example.replace("\b", "\\b") + '\n    """\n',
            "module.py": f'"""{long_module}\n"""\n',
            "short_module.py": f'"""{SIX}\n"""\n',
        },
    )
    assert docstrings.prose(example) == ["Run it.", "Example::", "Done."]
    assert docstrings.long_docstrings(root) == [
        f"module.py:1: module docstring: {docstrings.MAX_MODULE + 1} lines (at most {docstrings.MAX_MODULE})"
    ]


def test_measured_figures_are_found_in_docstrings_comments_and_lone_strings(tmp_path: Path) -> None:
    root = package(
        tmp_path,
        **{
            "code.py": (
                '"""Serves 1,220 req/s."""\n'
                "LIMIT = 5  # a round trip took 52 \u00b5s\n"
                'CHUNK = 32\n"""Measured on the 2-core machine: 3x faster."""\n'
                'def parse(value):\n    """Seconds from a string like ``5ms``; once measured, pinned."""\n'
                "SIZE = 4  # Cortex 0.20-0.29: what it passed\n"
            ),
            "inference_pb2.py": "# generated: 9 ms\n",
        },
    )
    assert docstrings.figures(root) == [
        "code.py:1: a measured figure (1,220 req/s): it belongs in benchmarks/README.md",
        "code.py:2: a measured figure (52 \u00b5s): it belongs in benchmarks/README.md",
        "code.py:4: a measured figure (Measured on, 3x): it belongs in benchmarks/README.md",
    ]


def test_localserve_has_no_docstring_over_its_limit_and_no_figure_in_code() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docstrings.py")], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout.splitlines()[-1:]) == (
        0,
        [
            f"no docstring over its limit ({docstrings.MAX_DOCSTRING} lines, {docstrings.MAX_MODULE} a module's), no figure"
        ],
    ), result.stdout
