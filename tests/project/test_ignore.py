"""The ignore rules of a project (.cortexignore / .localserveignore and the built-in ones) on a real tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from localserve.project.ignore import CortexRules, IgnoreRules, builtin_patterns, ignored
from tests.conftest import cli_env


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


NAMES = [".env", ".git", ".hidden", "..", "a", "cortex.yaml", "sub", "b.pyc", "c.pyo", "d.pyd", ".pyc", "__pycache__"]


@pytest.mark.parametrize("config", [None, "cortex.yaml", "sub/cortex.yaml", "../elsewhere/cortex.yaml"])
def test_cortex_rules_match_what_pathspec_makes_of_cortex_patterns(tmp_path: Path, config: str | None) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config_file = None if config is None else project / config
    by_name = CortexRules(project, config_file)
    by_pathspec = IgnoreRules(builtin_patterns(project, config_file))
    paths = [[a] for a in NAMES] + [[a, b] for a in NAMES for b in NAMES]
    paths += [[a, b, c] for a in NAMES for b in ("sub", "__pycache__", ".x", "cortex.yaml", "a.pyc") for c in NAMES]
    differ = [
        (relative, is_dir)
        for parts in paths
        for is_dir in (False, True)
        if by_name.match(relative := "/".join(parts), is_dir) != by_pathspec.match(relative, is_dir)
        # Inside a .env folder, pathspec's GitIgnoreSpec keeps a hidden folder ("!/.env" outranks ".*" for it) but
        # not a hidden file; git, and CortexRules, leave out both (asserted below).
        and parts[0] != ".env"
    ]
    assert differ == []
    assert by_name.match("cortex.yaml", False) is (config == "cortex.yaml")  # the corpus holds both kinds
    assert not by_name.match(".env", False) and not by_name.match(".env/a", False)
    assert by_name.match(".env/.x", True) and by_name.match(".env/.x/a", False) and by_name.match(".env/.y", False)


def test_a_project_without_ignore_files_is_packaged_without_importing_pathspec(tmp_path: Path) -> None:
    _tree(tmp_path, ["cortex.yaml", "main.py", ".env", ".secret", "pkg/__pycache__/m.pyc", "pkg/m.py"])
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from localserve.project.compat.view import excluded_files\n"
        f"print(excluded_files(Path({str(tmp_path)!r}), Path({str(tmp_path / 'cortex.yaml')!r})))\n"
        "print('pathspec' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["['.secret', 'cortex.yaml', 'pkg/__pycache__/']", "False"]
    (tmp_path / ".localserveignore").write_text("*.md\n")
    done = subprocess.run([sys.executable, "-c", code], env=cli_env(), capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[1] == "True"  # the project's own lines go through pathspec
