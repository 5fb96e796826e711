"""The ignore rules of a project (.cortexignore / .localserveignore and the built-in ones) on a real tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.project.ignore import ignored


def _tree(root: Path, files: list[str]) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)


FILES = [
    "cortex.yaml",
    "handler.py",
    "predictor.py",
    "requirements.txt",
    ".env",
    ".git/config",
    ".venv/lib/site.py",
    "pkg/.hidden",
    "pkg/mod.py",
    "pkg/__pycache__/mod.cpython-311.pyc",
    "pkg/old.pyc",
    "native.pyd",
    "opt.pyo",
    "data/keep.csv",
    "data/big.bin",
    "data/raw/x.bin",
    "logs/app.log",
    "sub/logs",
    "build/out.txt",
    "sub/build/out.txt",
    "notes/a.md",
    "notes/deep/b.md",
    "docs/guide.md",
    "docs/important.md",
]

IGNOREFILE = """\
# comments and blank lines are skipped

*.bin
!data/big.bin
logs/
/build
notes/**/*.md
docs/*.md
!docs/important.md
"""


def _kept(project: Path, config_file: Path | None) -> list[str]:
    is_ignored = ignored(project, config_file)
    kept = []
    for path in sorted(project.rglob("*")):
        if path.is_file() and not any(
            is_ignored(p) for p in [path, *path.parents] if p != project and p.is_relative_to(project)
        ):
            kept.append(path.relative_to(project).as_posix())
    return kept


def test_ignored_follows_seed_and_gitignore_semantics(tmp_path: Path) -> None:
    _tree(tmp_path, FILES)
    (tmp_path / ".cortexignore").write_text(IGNOREFILE)
    assert _kept(tmp_path, tmp_path / "cortex.yaml") == [
        ".env",
        "data/big.bin",
        "data/keep.csv",
        "docs/important.md",
        "handler.py",
        "pkg/mod.py",
        "predictor.py",
        "requirements.txt",
        "sub/build/out.txt",
        "sub/logs",
    ]


def test_ignored_accepts_relative_paths_and_rejects_outsiders(tmp_path: Path) -> None:
    _tree(tmp_path, FILES)
    (tmp_path / ".localserveignore").write_text("/handler.py\n")
    is_ignored = ignored(tmp_path, Path("cortex.yaml"))
    assert is_ignored(Path("cortex.yaml"))
    assert is_ignored(Path("handler.py"))
    assert not is_ignored(Path("pkg/handler.py"))
    assert is_ignored(Path("pkg/__pycache__"))
    assert not is_ignored(Path("predictor.py"))
    with pytest.raises(ValueError, match="is not inside the project"):
        is_ignored(tmp_path.parent / "elsewhere.py")


def test_no_config_file_and_no_ignore_files(tmp_path: Path) -> None:
    _tree(tmp_path, ["cortex.yaml", "main.py", ".secret", "a/b/c.pyc"])
    assert _kept(tmp_path, None) == ["cortex.yaml", "main.py"]
