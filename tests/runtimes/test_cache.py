"""The model cache's files and folders: a download written whole or not at all (a restart from the first byte, a
short stream, a failure), a folder renamed into place, the keys and names of its entries, a SavedModel found in
its folder, and the scratch folder of a process given no cache."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localserve.errors import ModelLoadError
from localserve.runtimes.cache import (
    RESTART,
    cache_key,
    download,
    model_root,
    safe_name,
    scratch_dir,
    staging_dir,
)


def test_a_download_is_renamed_into_place_once_whole(tmp_path: Path) -> None:
    target = tmp_path / "m.onnx"
    download(iter([b"ab", b"cd"]), target, 4, "m.onnx", show_bar=False)
    assert target.read_bytes() == b"abcd"
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_a_source_that_starts_again_leaves_only_its_second_run(tmp_path: Path) -> None:
    target = tmp_path / "m.onnx"
    download(iter([b"abXX", RESTART, b"ab", b"cd"]), target, 4, "m.onnx", show_bar=False)
    assert target.read_bytes() == b"abcd"


def test_a_short_or_failing_stream_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "m.onnx"
    with pytest.raises(ModelLoadError) as caught:
        download(iter([b"ab"]), target, 10, "s3://b/m.onnx", show_bar=False)
    assert str(caught.value) == "Download of s3://b/m.onnx was interrupted: got 2 of 10 bytes."

    def broken() -> Iterator[bytes]:
        yield b"ab"
        raise ConnectionError("reset")

    with pytest.raises(ConnectionError):
        download(broken(), target, None, "m.onnx", show_bar=False)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_is_built_beside_its_target_and_renamed_or_removed(tmp_path: Path) -> None:
    target = tmp_path / "model"
    with staging_dir(tmp_path, target) as staging:
        (staging / "saved_model.pb").write_bytes(b"")
        assert staging.parent == tmp_path and not target.exists()
    assert (target / "saved_model.pb").is_file()
    with pytest.raises(RuntimeError), staging_dir(tmp_path, tmp_path / "other") as staging:
        (staging / "half").write_bytes(b"")
        raise RuntimeError("unzip failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    with staging_dir(tmp_path, target) as staging:  # another replica finished first: its folder stays
        (staging / "late").write_bytes(b"")
    assert sorted(p.name for p in target.iterdir()) == ["saved_model.pb"]


def test_keys_and_names_of_entries() -> None:
    assert cache_key("s3://b/m.onnx", '"etag1"') == cache_key("s3://b/m.onnx", '"etag1"')
    assert cache_key("s3://b/m.onnx", '"etag1"') != cache_key("s3://b/m.onnx", '"etag2"')
    assert len(cache_key("x")) == 32
    assert [safe_name(n) for n in ("m.onnx", "", ".", "..", "a/b", "a\\b")] == ["m.onnx"] + ["model"] * 5


def test_a_savedmodel_wrapped_in_one_folder_is_found(tmp_path: Path) -> None:
    (tmp_path / "wrap" / "inner").mkdir(parents=True)
    (tmp_path / "wrap" / "inner" / "saved_model.pb").write_bytes(b"")
    (tmp_path / "wrap" / "__MACOSX").mkdir()  # what macOS's zip adds is not a second entry
    assert model_root(tmp_path / "wrap") == tmp_path / "wrap" / "inner"
    (tmp_path / "wrap" / "notes.txt").write_text("")
    assert model_root(tmp_path / "wrap") == tmp_path / "wrap"  # two entries: the folder itself


def test_the_scratch_folder_is_one_temporary_folder_per_process() -> None:
    assert scratch_dir() == scratch_dir()
    assert scratch_dir().is_dir() and scratch_dir().is_relative_to(tempfile.gettempdir())
    assert scratch_dir().name.startswith("localserve-cache-")
