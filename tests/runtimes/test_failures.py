"""Versions of a model set that did not load: refused again with the same 503 and no new load while their files
are the same, loaded again once they change; the client's message names no server path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localserve.errors import ModelLoadError
from localserve.runtimes.failures import FailedLoads


def test_a_failed_version_is_refused_without_a_load_until_its_files_change(tmp_path: Path) -> None:
    files = tmp_path / "models" / "iris" / "1"
    files.mkdir(parents=True)
    (files / "model.onnx").write_bytes(b"not a model")
    loads: list[str] = []

    def corrupt() -> str:
        loads.append("load")
        raise ModelLoadError(f"cannot parse {files / 'model.onnx'}")

    failed = FailedLoads()
    for _ in range(2):
        with pytest.raises(ModelLoadError) as caught:
            failed.load(("iris", 1), files, corrupt)
        assert caught.value.status_code == 503
        assert str(caught.value) == "Model 'iris' version 1 cannot be loaded: cannot parse model.onnx"
    assert loads == ["load"]  # the second request got the first failure, no second parse
    assert ("iris", 1) in failed and failed.of("iris") == {1: str(caught.value)} and failed.of("other") == {}
    stamp = os.stat(files / "model.onnx").st_mtime_ns
    os.utime(files / "model.onnx", ns=(stamp + 10**9, stamp + 10**9))  # the file replaced
    assert failed.load(("iris", 1), files, lambda: "model") == "model"
    assert ("iris", 1) not in failed and failed.of("iris") == {}


def test_an_os_error_is_a_503_too(tmp_path: Path) -> None:
    files = tmp_path / "m.onnx"
    files.write_bytes(b"")

    def unreadable() -> str:
        raise PermissionError(13, "Permission denied")

    with pytest.raises(ModelLoadError) as caught:
        FailedLoads().load(("m", 2), files, unreadable)
    assert (caught.value.status_code, str(caught.value)) == (
        503,
        "Model 'm' version 2 cannot be loaded: [Errno 13] Permission denied",
    )
