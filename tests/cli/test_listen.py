"""``localserve serve`` as a real process: the startup banner with the ports really bound, ``--root-path`` behind a
proxy that strips it, HTTPS, a Unix socket, ``--log-config``, and ``get --api-key`` against it."""

from __future__ import annotations

import json
import queue
import re
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from click.testing import CliRunner

from localserve.cli import main
from tests.conftest import EXAMPLES, cli_env, wait_until

pytestmark = pytest.mark.slow
LINE = re.compile(r"^\S+ \S+ INFO (.*)$")  # the text log format: date, time, level, message


class Server:
    """A ``localserve serve`` process and the log lines it has written so far."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("")  # the process ended

    def wait_for(self, predicate: Callable[[str], bool]) -> str:
        """The first log message (new or seen) that ``predicate`` accepts; fails if the process ends first."""
        for message in self.seen:
            if predicate(message):
                return message
        while True:
            line = self.lines.get(timeout=120)  # a hang's guard only: lines come as the server writes them
            assert line, f"the server ended (code {self.proc.wait()}): {self.seen}"
            match = LINE.match(line)
            message = match.group(1) if match else line
            self.seen.append(message)
            if predicate(message):
                return message

    def loaded(self, api: str = "json-tax") -> None:
        """Wait for the API's ``loaded`` line: the banner comes once the server listens, before the APIs load."""
        self.wait_for(lambda m: m.startswith(f"api '{api}' loaded"))

    def banner(self, last: str = "  metrics: ") -> dict[str, str]:
        """The banner's ``name: value`` lines, once its ``last`` line is out."""
        self.wait_for(lambda m: m.startswith(last))
        start = next(i for i, m in enumerate(self.seen) if m.startswith("  API ")) - 1
        entries = {"serving": self.seen[start]}
        for message in self.seen[start + 1 :]:
            if not message.startswith("  "):
                break
            key, _, value = message.strip().partition(": ")
            entries[key] = value
        return entries


@contextmanager
def serving(*args: str, project: Path = EXAMPLES / "json_tax", **env: str) -> Iterator[Server]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "localserve", "serve", *args],
        cwd=project,
        env=cli_env(LOCALSERVE_LOG_FORMAT="text", **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = Server(proc)
    try:
        yield server
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        server.reader.join(60)
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == 0, server.seen


def test_the_banner_names_the_ports_bound_and_the_pages_under_the_root_path() -> None:
    with serving(
        "-h", "main:handler", "--port", "0", "--grpc-port", "0", "--root-path", "/tax/", "--api-key", "k"
    ) as s:
        banner = s.banner(last="  gRPC")
        found = re.fullmatch(r"serving command line at http://127\.0\.0\.1:(\d+)/tax \(/json-tax\)", banner["serving"])
        assert found is not None, banner
        port = int(found[1])
        assert port != 0
        base = f"http://127.0.0.1:{port}"
        grpc_port = int(banner["gRPC (inference.GRPCInferenceService)"].rpartition(":")[2])
        assert banner == {
            "serving": f"serving command line at {base}/tax (/json-tax)",
            "API json-tax": f"{base}/tax/json-tax",
            "docs": f"{base}/tax/docs",
            "dashboard": f"{base}/tax/dashboard",
            "metrics": f"{base}/tax/metrics",
            "gRPC (inference.GRPCInferenceService)": f"127.0.0.1:{grpc_port}",
        }
        assert grpc_port not in (0, port)

        def through_proxy(url: str, **kwargs: object) -> httpx.Response:
            """What a proxy serving localserve under /tax sends on: the path without the prefix."""
            path = urlsplit(url).path
            assert path.startswith("/tax/"), path
            return httpx.request(str(kwargs.pop("method", "GET")), base + path.removeprefix("/tax"), **kwargs)  # type: ignore[arg-type]

        key = {"Authorization": "Bearer k"}
        s.loaded()
        reply = through_proxy(banner["API json-tax"], method="POST", json={"total_without_tax": 100}, headers=key)
        assert (reply.status_code, reply.json()) == (200, {"total": 108.0})
        for page, assets in (
            ("docs", ["docs/swagger-ui-bundle.js", "docs/docs.js"]),
            ("dashboard", ["dashboard/dashboard.js"]),
        ):
            html = through_proxy(banner[page]).text
            links = re.findall(r'(?:href|src)="([^"]+)"', html)
            for asset in assets:
                assert asset in links
            for link in links:
                if not link.startswith("data:"):  # every link of the page resolves under the prefix
                    assert through_proxy(urljoin(banner[page], link), headers=key).status_code == 200, link
        # what the pages' scripts fetch, resolved from the page as a browser resolves it
        assert through_proxy(urljoin(banner["dashboard"], "dashboard/data"), headers=key).json()["apis"]
        document = through_proxy(urljoin(banner["docs"], "openapi.json"), headers=key).json()
        assert document["servers"] == [{"url": "/tax"}]  # "Try it out" goes through the proxy too
        assert "/json-tax" in document["paths"]

        # get: 401 without the key, the table with it (--api-key or LOCALSERVE_API_KEY)
        runner = CliRunner()
        refused = runner.invoke(main, ["get", "--url", base])
        assert refused.exit_code == 1
        assert refused.stderr.startswith(f"Error: {base}/stats answered 401: ")
        assert refused.stderr.endswith(" (give the server's key: --api-key KEY or LOCALSERVE_API_KEY)\n")
        table = runner.invoke(main, ["get", "--url", base, "--api-key", "k"])
        assert table.exit_code == 0 and table.stdout.startswith("api ")
        assert table.stdout.endswith(" ms\n")  # the last line ends, as a shell prompt after it expects
        done = runner.invoke(main, ["get", "--json"], env={"LOCALSERVE_API_KEY": "k", "LOCALSERVE_URL": base})
        assert done.exit_code == 0 and json.loads(done.stdout)[0]["api"] == "json-tax"


def _self_signed(folder: Path) -> tuple[Path, Path]:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_file, cert_file = folder / "key.pem", folder / "cert.pem"
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_file, cert_file


def test_https_with_uvicorns_ssl_flags(tmp_path: Path) -> None:
    key, cert = _self_signed(tmp_path)
    with serving("-h", "main:handler", "--port", "0", "--ssl-keyfile", str(key), "--ssl-certfile", str(cert)) as s:
        url = s.banner()["API json-tax"]
        assert url.startswith("https://127.0.0.1:")
        s.loaded()
        context = ssl.create_default_context(cafile=str(cert))
        reply = httpx.post(url, json={"total_without_tax": 100}, verify=context)
        assert (reply.status_code, reply.json()) == (200, {"total": 108.0})
        with pytest.raises(httpx.ConnectError):  # and nothing but that certificate is trusted for it
            httpx.post(url, json={"total_without_tax": 100}, verify=ssl.create_default_context())


def test_a_unix_socket_and_a_log_config_file(tmp_path: Path) -> None:
    socket_path = tmp_path / "ls.sock"
    log_file = tmp_path / "server.log"
    config = {
        "version": 1,
        "formatters": {"plain": {"format": "%(levelname)s|%(name)s|%(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(log_file), "formatter": "plain"}},
        "root": {"handlers": ["file"], "level": "INFO"},
    }
    (tmp_path / "logging.json").write_text(json.dumps(config))
    with serving("-h", "main:handler", "--uds", str(socket_path), "--log-config", str(tmp_path / "logging.json")):
        wait_until(lambda: "|localserve|  metrics: " in (log_file.read_text() if log_file.exists() else ""), "banner")
        wait_until(lambda: "|localserve|api 'json-tax' loaded" in log_file.read_text(), "the API loaded")
        lines = log_file.read_text().splitlines()
        assert (
            f"INFO|localserve|serving command line on the Unix socket {socket_path} (curl --unix-socket "
            in "\n".join(lines)
        )
        assert "INFO|localserve|  API json-tax: http://localhost/json-tax" in lines
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path))) as client:
            reply = client.post("http://localhost/json-tax", json={"total_without_tax": 100})
            assert (reply.status_code, reply.json()) == (200, {"total": 108.0})
        wait_until(lambda: "|localserve.access|" in log_file.read_text(), "the access line")  # through the file too
