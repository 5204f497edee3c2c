"""PIP-186's proof on the real process: storage deletes fail at random (the broker's test-only fault key),
the broker is SIGKILLed at points drawn from a seed while topics trim ledgers through both phases, then
restarted; once it has settled, the audit of the stopped data directory finds zero orphans and zero
dangling references, and every unacknowledged message is still delivered (official client). The same
scenario with ``topicTwoPhaseDeletionEnabled=false`` leaks orphans: the figure it is compared with."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

WAIT_S = 30.0
TOPICS = 5
ROUNDS = 3
PER_ROUND = 12
COMMON = ("--set", "managedLedgerMaxEntriesPerLedger=3", "--set", "defaultRetentionTimeInMinutes=0",
          "--set", "defaultRetentionSizeInMB=0", "--set", "retentionCheckIntervalInSeconds=1",
          "--set", "brokerDeduplicationSnapshotIntervalSeconds=1", "--set", "managedLedgerCursorPersistIntervalMs=10",
          "--set", "twoPhaseDeletionReconsumeLaterInSeconds=1", "--set", "twoPhaseDeletionLedgerDeletionParallelism=2")
FAULTS = ("--set", "magnetarTestingStorageDeleteFailureProbability=0.4")


def audit(data_dir: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "magnetar.cli", "admin", "audit-ledgers", "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def one_round(broker: BrokerProcess, rng: random.Random, unacked: dict[str, set[bytes]], n: int) -> None:
    """Produce to every topic, consume and ack most of it, then die at a seeded point of the trimming."""
    client = make_client(broker.url)
    try:
        for t in range(TOPICS):
            topic = f"persistent://public/default/two-phase-{t}"
            consumer = client.subscribe(topic, "sub")
            producer = client.create_producer(topic, batching_enabled=False)
            for i in range(PER_ROUND):
                payload = f"{t}-{n}-{i}".encode()
                producer.send(payload)
                unacked[topic].add(payload)
            for _ in range(PER_ROUND - rng.randint(0, 2)):
                msg = consumer.receive(10_000)
                consumer.acknowledge(msg)
                unacked[topic].discard(msg.data())
            consumer.close()
    finally:
        client.close()
    start = len(broker.log_text())
    wanted = rng.randint(1, 6)  # the kill point: after this many trims or failed deletes (either phase)
    broker.wait_for(lambda log: log[start:].count(": trimmed ") + log[start:].count("retried later") >= wanted,
                    WAIT_S)
    broker.kill()


def settle(broker: BrokerProcess) -> None:
    """Faults off: let every queued deletion finish (the deletion topics' backlog reaches zero)."""
    for _ in range(120):  # bounded: each pass waits for the broker to log progress, or 1 s
        status, body = call(broker.web_url, "GET", "/admin/v2/broker-stats/inflight-deletions")
        if status == 200 and body["inflightDeletions"] == 0:
            return
        size = len(broker.log_text())
        broker.wait_for(lambda log, size=size: len(log) > size, 1.0)  # type: ignore[misc]
    raise AssertionError(f"deletions never drained: {body}")


def run(data_dir: Path, seed: int, two_phase: bool) -> dict[str, object]:
    rng = random.Random(seed)
    args = (*COMMON, "--set", f"topicTwoPhaseDeletionEnabled={str(two_phase).lower()}")
    unacked: dict[str, set[bytes]] = {f"persistent://public/default/two-phase-{t}": set() for t in range(TOPICS)}
    broker = BrokerProcess(data_dir, extra_args=(*args, *FAULTS))
    for n in range(ROUNDS):
        broker.start()
        one_round(broker, rng, unacked, n)
    clean = BrokerProcess(data_dir, extra_args=args).start()
    try:
        if two_phase:
            settle(clean)
        client = make_client(clean.url)
        try:
            for topic, expected in unacked.items():
                consumer = client.subscribe(topic, "sub")
                received: set[bytes] = set()
                for _ in range(len(expected) + 50):  # bounded: redeliveries after the kills may repeat some
                    if expected <= received:
                        break
                    msg = consumer.receive(10_000)
                    received.add(msg.data())
                    consumer.acknowledge(msg)
                assert expected <= received, f"{topic} lost {sorted(expected - received)[:5]}"
        finally:
            client.close()
    finally:
        clean.stop()
    return audit(data_dir)


def test_two_phase_deletion_leaves_no_orphan_after_faults_and_kills(tmp_path: Path) -> None:
    report = run(tmp_path / "data", 11, two_phase=True)
    assert report["orphans"] == [], report
    assert report["dangling"] == [], report


def test_one_phase_deletion_leaks_orphans_in_the_same_scenario(tmp_path: Path) -> None:
    report = run(tmp_path / "data", 11, two_phase=False)
    assert report["dangling"] == [], report
    assert len(report["orphans"]) > 0, report  # what two phases prevent
