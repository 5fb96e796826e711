"""The multiprocess folder of a serve with replicas: refused unless prometheus_client was told of it, made
fresh (an earlier run's files removed), and told of a replica that exited."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.errors import ConfigError
from localserve.metrics.folder import MULTIPROC_ENV, check_multiprocess_dir, prepare_metrics_dir


def test_the_folder_must_be_the_one_in_the_environment_at_start(tmp_path: Path) -> None:
    check_multiprocess_dir(str(tmp_path), {MULTIPROC_ENV: str(tmp_path)})
    with pytest.raises(ConfigError) as caught:
        check_multiprocess_dir(str(tmp_path), {})
    assert str(caught.value) == (
        f"The metrics folder {str(tmp_path)!r} needs PROMETHEUS_MULTIPROC_DIR={tmp_path} in the process's environment "
        "before prometheus_client is imported (got None); the supervisor sets it when it spawns a replica."
    )


def test_a_fresh_folder_keeps_nothing_of_an_earlier_run(tmp_path: Path) -> None:
    folder = tmp_path / "metrics"
    prepare_metrics_dir(str(folder))
    assert folder.is_dir()
    (folder / "counter_123.db").write_bytes(b"old")
    (folder / "notes.txt").write_text("not ours")
    prepare_metrics_dir(str(folder))
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
