"""Where a localserve process ends: it returns when nothing still runs, and exits at once with its code past API
threads still busy or threads user code left running, naming them.

Exiting is the behaviour (``os._exit``), so it runs in a child Python: in pytest's own process a thread another
test left running would end the session."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import cli_env

ENDING = """
import logging, threading
from localserve.cli.exits import exit_past_threads
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
threading.Thread(target=threading.Event().wait, name="daemon", daemon=True).start()
exit_past_threads(3, [])  # a daemon thread does not keep a process alive: this returns
print("returned")
threading.Thread(target=threading.Event().wait, name="user-thread").start()  # never ends, not a daemon
exit_past_threads(7, ["iris-1"])
print("not reached")
"""


def test_it_returns_when_nothing_runs_and_else_ends_the_process_at_once_with_its_code() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ENDING], capture_output=True, text=True, env=cli_env(), timeout=60, check=False
    )
    assert done.returncode == 7
    assert done.stdout == "returned\n"
    assert done.stderr.splitlines() == [
        "INFO exiting while these threads still run: iris-1",
        "WARNING exiting although user code left threads running: user-thread",
    ]
