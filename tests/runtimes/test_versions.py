"""The stateless pieces of a multi-model API: the models configured or found in a folder, a model's version
folders (links out of it and names that are no version left out), the version a call names, and their stamps."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from localserve.config.schema import SINGLE_MODEL_NAME, ModelPath, ModelsConfig
from localserve.errors import ModelLoadError, NotFound, RequestError
from localserve.runtimes.versions import (
    Source,
    configured,
    models_in,
    stamp_of,
    version_changes,
    version_number,
    versions_in,
)


def test_configured_models_of_path_and_paths() -> None:
    assert configured(ModelsConfig(path="m.onnx")) == {SINGLE_MODEL_NAME: Source(SINGLE_MODEL_NAME, "m.onnx")}
    paths = ModelsConfig(paths=(ModelPath("a", "a.onnx"), ModelPath("b", "b", "own")), signature_key="serving")
    assert configured(paths) == {"a": Source("a", "a.onnx", "serving"), "b": Source("b", "b", "own")}
    assert configured(ModelsConfig(dir="models")) == {}


def test_a_dir_holds_folders_and_onnx_files(tmp_path: Path) -> None:
    for name in ("iris", ".hidden"):
        (tmp_path / name).mkdir()
    for name in ("mlp.onnx", "notes.txt"):
        (tmp_path / name).write_text("")
    assert models_in(tmp_path, ModelsConfig(dir="models")) == {
        "iris": Source("iris", str(tmp_path / "iris")),
        "mlp.onnx": Source("mlp.onnx", str(tmp_path / "mlp.onnx")),
    }
    with pytest.raises(ModelLoadError, match=r"^The models folder 'models' is not a folder\.$"):
        models_in(tmp_path / "notes.txt", ModelsConfig(dir="models"))


def test_version_folders_are_whole_numbers_with_files_inside_the_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = tmp_path / "iris"
    for name in ("1", "2", "empty", "\u00b2", "3"):
        (model / name).mkdir(parents=True)
    for name in ("1", "2", "\u00b2"):
        (model / name / "model.onnx").write_text("")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "model.onnx").write_text("")
    os.symlink(outside, model / "7")
    with caplog.at_level(logging.WARNING, logger="localserve"):
        assert versions_in(model) == {1: model / "1", 2: model / "2"}  # "3" is empty: not yet a version
        versions_in(model)  # each warning once
    assert sorted(caplog.messages) == sorted(  # the folders are read in the file system's order
        [
            f"version folder {model / chr(0xB2)} skipped: a version is a whole number of at most 18 ASCII digits",
            f"model folder iris: version 7 is a link to {outside}, outside the model's folder; it is not served "
            "(copy it in)",
        ]
    )
    flat = tmp_path / "flat"
    flat.mkdir()
    assert versions_in(flat) == {1: flat}  # no version folders: the model itself is version 1


def test_the_version_a_call_names() -> None:
    versions = {1: Path("1"), 3: Path("3")}
    assert version_number("iris", "latest", versions) == 3
    assert version_number("iris", "highest", versions) == 3
    assert version_number("iris", "1", versions) == 1
    assert version_number("iris", 3, versions) == 3
    with pytest.raises(NotFound) as caught:
        version_number("iris", "2", versions)
    assert str(caught.value) == "Model 'iris' has no version 2; its versions are: 1, 3."
    with pytest.raises(RequestError, match=r"^model_version must be a whole number"):
        version_number("iris", "v1", versions)
    with pytest.raises(RequestError):
        version_number("iris", True, versions)  # type: ignore[arg-type]


def test_the_stamp_of_a_version_follows_its_latest_file(tmp_path: Path) -> None:
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "a").write_text("")
    before = stamp_of(tmp_path / "v")
    later = os.stat(tmp_path / "v" / "a").st_mtime_ns + 10**9
    os.utime(tmp_path / "v" / "a", ns=(later, later))
    assert stamp_of(tmp_path / "v") == float(later) > before
    assert stamp_of(tmp_path / "v" / "a") == float(later)
    assert stamp_of(tmp_path / "gone") == -1.0


def test_versions_added_and_removed_between_two_readings() -> None:
    assert version_changes({"a": {1, 2}, "b": {1}}, {"a": {2, 3}, "c": {1}}) == [
        {"model": "a", "version": 3, "change": "added"},
        {"model": "c", "version": 1, "change": "added"},
        {"model": "a", "version": 1, "change": "removed"},
        {"model": "b", "version": 1, "change": "removed"},
    ]
