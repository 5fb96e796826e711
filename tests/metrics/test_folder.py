"""The multiprocess folder of a serve with replicas: refused unless prometheus_client was told of it, made
fresh (an earlier run's files removed), and told of a replica that exited (its live gauges dropped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.errors import ConfigError
from localserve.metrics.folder import check_multiprocess_dir, mark_process_dead, prepare_metrics_dir


def test_a_metrics_dir_without_prometheus_clients_variable_is_refused() -> None:
    check_multiprocess_dir("/tmp/m", {"PROMETHEUS_MULTIPROC_DIR": "/tmp/m"})
    with pytest.raises(ConfigError) as caught:
        check_multiprocess_dir("/tmp/m", {"HOME": "/root"})
    assert str(caught.value) == (
        "The metrics folder '/tmp/m' needs PROMETHEUS_MULTIPROC_DIR=/tmp/m in the process's environment before "
        "prometheus_client is imported (got None); the supervisor sets it when it spawns a replica."
    )


def test_prepare_metrics_dir_removes_an_earlier_runs_files(tmp_path: Path) -> None:
    (tmp_path / "counter_12.db").write_bytes(b"x")
    (tmp_path / "keep.txt").write_text("")
    prepare_metrics_dir(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_mark_process_dead_with_the_supervisors_dir(tmp_path: Path) -> None:
    for name in ("gauge_livesum_41.db", "gauge_livemax_41.db", "counter_41.db", "gauge_livesum_42.db"):
        (tmp_path / name).write_bytes(b"")
    mark_process_dead(41, str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counter_41.db", "gauge_livesum_42.db"]


def test_a_folder_that_is_not_there_yet_is_made(tmp_path: Path) -> None:
    prepare_metrics_dir(str(tmp_path / "new" / "metrics"))
    assert (tmp_path / "new" / "metrics").is_dir()
