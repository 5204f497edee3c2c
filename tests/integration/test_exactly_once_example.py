"""examples/exactly_once.py under SIGKILLs: the broker is killed at random moments while the example runs and
is restarted; an official-client consumer of the output must see each input's result exactly once."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pulsar
import pytest

from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "exactly_once.py"
INPUTS = 60
KILLS = 3
QUIET_MS = 1_000


def _drain(consumer: pulsar.Consumer) -> list[bytes]:
    out = []
    for _ in range(INPUTS * 3):  # bounded: ends on the first quiet period
        try:
            msg = consumer.receive(timeout_millis=QUIET_MS)
        except pulsar.Timeout:
            break
        consumer.acknowledge(msg)
        out.append(msg.data())
    return out


def test_each_output_exactly_once_across_broker_sigkills(fresh_broker: BrokerProcess) -> None:
    run = uuid.uuid4().hex[:8]
    source, sink = f"persistent://public/default/eo-in-{run}", f"persistent://public/default/eo-out-{run}"
    client = make_client(fresh_broker.url)
    try:
        producer = client.create_producer(source, batching_enabled=False)
        for i in range(INPUTS):
            producer.send(f"order-{i}".encode())
        client.subscribe(sink, "check").close()  # the output is kept from the start for this subscription
    finally:
        client.close()

    example = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--service-url", fresh_broker.url, "--input", source, "--output", sink,
         "--idle-ms", "8000", "--txn-timeout-ms", "3000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    rng = random.Random(2026)
    stopped = threading.Event()
    try:
        for _ in range(KILLS):  # SIGKILL the broker at a random moment of the run, then bring it back
            # the wait draws where the kill lands in the run (seeded); it synchronises nothing
            if stopped.wait(rng.uniform(0.3, 1.5)) or example.poll() is not None:
                break
            fresh_broker.kill()
            fresh_broker.start()
        out, err = example.communicate(timeout=180)
    finally:
        if example.poll() is None:
            example.kill()
    assert example.returncode == 0, err

    client = make_client(fresh_broker.url)
    try:
        consumer = client.subscribe(sink, "check")
        seen = sorted(x.decode() for x in _drain(consumer))
    finally:
        client.close()
    assert seen == sorted(f"ORDER-{i}" for i in range(INPUTS)), (out, err[-3000:])
