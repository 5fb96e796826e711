"""User modules across Project contexts and reloads: the names a folder provides, another project's modules
set aside and put back, and the modules imported from a folder let go (with their bytecode), ours never.

Real modules are imported from ``tmp_path``; sys.path and sys.modules are restored after each test."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localserve.project.compat.modules import (
    forget_modules,
    is_ours,
    put_back,
    set_aside_shadowed,
    top_level_names,
)


@pytest.fixture(autouse=True)
def modules(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = dict(sys.modules)
    yield
    for name in set(sys.modules) - set(before):
        del sys.modules[name]
    sys.modules.update(before)


def project(root: Path, text: str) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "lsmainx.py").write_text(text)
    return root


def test_the_names_a_folder_provides(tmp_path: Path) -> None:
    project(tmp_path, "")
    (tmp_path / "not-a-name.py").write_text("")
    (tmp_path / "data").mkdir()  # a folder without __init__.py
    (tmp_path / "localserve").mkdir()
    (tmp_path / "localserve" / "__init__.py").write_text("")  # ours, whatever a project holds
    assert top_level_names(tmp_path) == {"lsmainx", "pkg"}
    assert top_level_names(tmp_path / "missing") == set()
    assert is_ours("localserve.server.app") and is_ours("cortex_internal") and not is_ours("localserves")


def test_another_projects_module_of_the_same_name_is_set_aside_and_put_back(tmp_path: Path) -> None:
    first = project(tmp_path / "first", "WHO = 'first'\n")
    second = project(tmp_path / "second", "WHO = 'second'\n")
    sys.path.insert(0, str(first))
    assert importlib.import_module("lsmainx").WHO == "first"
    sys.path[0] = str(second)
    aside = set_aside_shadowed([second], own=[second])
    assert sorted(aside) == ["lsmainx"]
    assert importlib.import_module("lsmainx").WHO == "second"  # imported afresh, from its own project
    put_back(aside)
    assert sys.modules["lsmainx"].WHO == "first"


def test_modules_imported_from_a_folder_are_let_go_with_their_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # a .pyc, as a user's Python writes one
    folder = project(tmp_path / "p", "import pkg\nWHO = 1\n")
    sys.path.insert(0, str(folder))
    before = set(sys.modules)
    module = importlib.import_module("lsmainx")
    cached = Path(module.__cached__)
    assert cached.is_file()
    assert forget_modules(before, [str(folder)], bytecode=True) == ["lsmainx", "pkg"]
    assert "lsmainx" not in sys.modules and "pkg" not in sys.modules
    assert not cached.exists()
    assert forget_modules(set(sys.modules), [str(folder)]) == []  # nothing imported since
