"""The project as the platform packaged it: a mirror of links without the config file, hidden files (``.env``
aside), bytecode and what ``.cortexignore`` lists; brought up to date as files come and go."""

from __future__ import annotations

from pathlib import Path

from localserve.project.compat.view import excluded_files, packaged_view, sync_view


def files_of(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_symlink() or p.is_file()}


def test_the_mirror_holds_the_packaged_files_as_links_and_follows_changes(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    for name in ("cortex.yaml", "predictor.py", ".env", ".secret", "notes.txt", "data/a.csv", "data/big.bin"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(name)
    (project / "__pycache__").mkdir()
    (project / "__pycache__" / "predictor.cpython-312.pyc").write_bytes(b"")
    (project / ".cortexignore").write_text("notes.txt\ndata/*.bin\n")
    config = project / "cortex.yaml"

    assert excluded_files(project, config) == [
        "__pycache__/",
        ".cortexignore",
        ".secret",
        "cortex.yaml",
        "notes.txt",
        "data/big.bin",
    ]
    mirror = packaged_view(project, config)
    assert files_of(mirror) == {".env", "predictor.py", "data/a.csv"}
    assert (mirror / "data" / "a.csv").is_symlink() and (mirror / "data" / "a.csv").read_text() == "data/a.csv"

    (project / "new.py").write_text("new")
    (project / "data" / "a.csv").unlink()
    (project / ".cortexignore").write_text("notes.txt\ndata/*.bin\n.env\n")
    sync_view(project, config, mirror)
    assert files_of(mirror) == {"predictor.py", "new.py"}
    assert (mirror / "data").is_dir()  # the folder itself is still packaged
