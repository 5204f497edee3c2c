"""The PIP-68 leader-election example: several instances at once, no lost update."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pulsar

from tests.integration.broker_process import BrokerProcess

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "leader_election.py"
INSTANCES = 4
ROUNDS = 5


def test_instances_take_turns_and_no_update_is_lost(broker: BrokerProcess, client: pulsar.Client) -> None:
    topic = f"persistent://public/default/leader-{uuid.uuid4().hex[:8]}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--service-url", broker.url, "--name", f"worker-{i}",
             "--rounds", str(ROUNDS), "--topic", topic],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(INSTANCES)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    values, leaders = [], []
    while reader.has_message_available():
        msg = reader.read_next(10_000)
        values.append(int(msg.data()))
        leaders.append(msg.properties()["leader"])
    assert values == list(range(1, INSTANCES * ROUNDS + 1)), "a leader missed another's update"
    turns = [leaders[i] for i in range(0, len(leaders), ROUNDS)]
    assert sorted(turns) == sorted(f"worker-{i}" for i in range(INSTANCES))
    assert all(leaders[i : i + ROUNDS] == [leaders[i]] * ROUNDS for i in range(0, len(leaders), ROUNDS))
