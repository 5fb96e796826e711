"""The supervisor of replicas: GPUs spread over them, each replica's options and environment, their listening sockets."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from localserve.config import load_config
from localserve.errors import StartError
from localserve.processes.listeners import bind_socket, close_socket, spreads_connections
from localserve.processes.replicas import Supervisor, visible_gpus
from localserve.server import ServeOptions


def test_replicas_are_spread_over_visible_gpus(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "cortex.yaml").write_text("- kind: api\n  name: a\n  model: m.onnx\n  compute: {gpu: 1}\n")
    assert visible_gpus("2,5") == ["2", "5"]
    assert visible_gpus("-1") == []
    supervisor = Supervisor(load_config(tmp_path), ServeOptions(cuda_visible_devices="2,5", replicas=3))
    envs = [supervisor.replica_env(i) for i in range(3)]
    assert envs == [{"CUDA_VISIBLE_DEVICES": "2"}, {"CUDA_VISIBLE_DEVICES": "5"}, {"CUDA_VISIBLE_DEVICES": "2"}]
    options = [supervisor.replica_options(i) for i in range(3)]
    assert [(o.replica, o.replicas) for o in options] == [(0, 3), (1, 3), (2, 3)]
    supervisor.metrics_dir = "/tmp/m"  # made by run(): prometheus_client's variable, and the same in the options
    assert supervisor.replica_env(1) == {"PROMETHEUS_MULTIPROC_DIR": "/tmp/m", "CUDA_VISIBLE_DEVICES": "5"}
    assert supervisor.replica_options(1).metrics_dir == "/tmp/m"


def test_cpu_apis_get_no_device(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "cortex.yaml").write_text("- kind: api\n  name: a\n  model: m.onnx\n")
    supervisor = Supervisor(load_config(tmp_path), ServeOptions(cuda_visible_devices="0", replicas=2))
    assert "CUDA_VISIBLE_DEVICES" not in supervisor.replica_env(1)


def test_a_replacement_accepts_connections_only_once_loaded_while_a_sibling_serves(tmp_path: Path) -> None:
    (tmp_path / "cortex.yaml").write_text("- kind: api\n  name: a\n  model: m.onnx\n")

    class Running:
        def is_alive(self) -> bool:
            return True

    supervisor = Supervisor(load_config(tmp_path), ServeOptions(replicas=2, graceful_timeout=1))
    assert not supervisor.replica_options(1).accept_when_loaded  # the first start answers probes while loading
    supervisor.processes[0] = Running()  # type: ignore[assignment]
    assert not supervisor.replica_options(1).accept_when_loaded  # replica 0 runs but is not ready yet
    supervisor.ready_since[0] = 1.0
    assert supervisor.replica_options(1).accept_when_loaded
    assert not supervisor.replica_options(0).accept_when_loaded  # itself does not count
    supervisor.processes[0] = None
    assert not supervisor.replica_options(1).accept_when_loaded  # the ready one is gone


@pytest.mark.skipif(not spreads_connections(None), reason="SO_REUSEPORT spreads connections on Linux only")
def test_replicas_get_a_listening_socket_each_in_the_ports_reuseport_group(tmp_path: Path) -> None:
    (tmp_path / "cortex.yaml").write_text("- kind: api\n  name: a\n  model: m.onnx\n")
    supervisor = Supervisor(load_config(tmp_path), ServeOptions(replicas=2))
    first = bind_socket("127.0.0.1", 0)  # as serve --port 0 binds it: without SO_REUSEPORT, proving the port free
    port = first.getsockname()[1]
    sockets = supervisor.listening_sockets(first)
    try:
        assert first.fileno() == -1  # closed: the port is the group's now
        assert len({id(s) for s in sockets}) == 2
        for sock in sockets:
            assert sock.getsockname() == ("127.0.0.1", port)
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1  # connections wait for the replica
        with pytest.raises(StartError, match=f"Port {port} on 127.0.0.1 is already in use"):
            bind_socket("127.0.0.1", port)  # another server, without SO_REUSEPORT, cannot take the port
        replacement = bind_socket(*supervisor.address, group=True, listen=False)
        assert replacement.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 0  # until its replica listens
        replacement.close()
    finally:
        for sock in sockets:
            sock.close()


def test_one_replica_and_unix_sockets_keep_one_socket(tmp_path: Path) -> None:
    (tmp_path / "cortex.yaml").write_text("- kind: api\n  name: a\n  model: m.onnx\n")
    alone = bind_socket("127.0.0.1", 0)
    assert Supervisor(load_config(tmp_path), ServeOptions(replicas=1)).listening_sockets(alone) == [alone]
    alone.close()
    uds = str(tmp_path / "s.sock")
    shared = bind_socket("127.0.0.1", 0, uds)
    supervisor = Supervisor(load_config(tmp_path), ServeOptions(replicas=3, uds=uds))
    assert supervisor.listening_sockets(shared) == [shared] * 3
    close_socket(shared, uds)
