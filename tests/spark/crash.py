"""What the exactly-once crash tests share: killing a driver stopped at a hook point, and reading a sink's
output topic as it is right now (no waiting for a transaction to time out)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path

import pulsar

from tests.spark.conftest import PARTITIONS

KILL_WAIT_S = 300.0


def wait_and_kill(proc: subprocess.Popen[bytes], signal_file: Path, log: Path) -> None:
    """Wait (bounded) until the driver stops at its hook point, then SIGKILL it and the process that stopped."""
    for _ in range(int(KILL_WAIT_S / 0.5)):  # bounded: the process exits or the hook point is reached
        if signal_file.exists() and signal_file.read_text():
            break
        try:
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"the query exited before {signal_file.name}:\n{log.read_text()[-4000:]}")
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"{signal_file.name} not reached within {KILL_WAIT_S} s")
    os.killpg(proc.pid, signal.SIGKILL)  # the driver: its JVM, its Python and its Python workers
    with contextlib.suppress(ProcessLookupError):  # the blocked worker, if in a group of its own
        os.kill(int(signal_file.read_text()), signal.SIGKILL)
    proc.wait(60)


def read_now(url: str, topic: str) -> list[str]:
    """Every message the official client can read from the topic's partitions right now: reads while the broker
    says more is available, each read bounded (a frozen partition fails the read instead of waiting)."""
    client = pulsar.Client(url)
    try:
        got: list[str] = []
        for p in range(PARTITIONS):
            reader = client.create_reader(f"{topic}-partition-{p}", pulsar.MessageId.earliest)
            for _ in range(100_000):  # bounded
                if not reader.has_message_available():
                    break
                got.append(reader.read_next(5_000).data().decode())
        return got
    finally:
        client.close()


def open_txns(web_url: str, topic: str) -> list[int]:
    """Per partition, the transactions the broker's buffer still holds open (``ongoingTxnSize``)."""
    name = topic.removeprefix("persistent://")
    out = []
    for p in range(PARTITIONS):
        url = f"{web_url}/admin/v3/transactions/transactionBufferStats/{name}-partition-{p}"
        with urllib.request.urlopen(url, timeout=30) as resp:
            out.append(int(json.load(resp)["ongoingTxnSize"]))
    return out
