"""PIP-33 replicated subscriptions between real clusters (separate ``magnetar standalone`` processes),
driven by the official client: a consumer acks part of a topic in one cluster and fails over to another,
where it resumes with no loss and a bounded number of duplicates.

The producer writes ``GROUP`` messages per snapshot interval: after each group it waits for a snapshot
started after the group began to complete. So the newest snapshot at or before any acknowledged message
is at most two groups behind it, and a failover re-delivers at most ``DUP_BOUND`` = 2 GROUP messages,
plus, on Shared subscriptions, whatever was acknowledged out of order after the mark-delete position.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from magnetar.cli.admin import main as admin_main
from tests.integration.admin.http import call
from tests.integration.replication.geo import Clusters, assert_nothing_more, wait_until

pytestmark = pytest.mark.integration
FREQUENCY_MS = 100
GROUP = 10
# a snapshot completes per group, started after the group began: the newest one at or before an ack is at
# most two groups behind it (the rate times the snapshot interval, twice)
DUP_BOUND = 2 * GROUP


@pytest.fixture(scope="module")
def geo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    clusters = Clusters(Path(tmp_path_factory.mktemp("rsub")), ("a", "b", "c"),
                        "--set", f"replicatedSubscriptionsSnapshotFrequencyMillis={FREQUENCY_MS}",
                        "--set", "replicatedSubscriptionsSnapshotTimeoutSeconds=2")
    try:
        yield clusters.start()
    finally:
        clusters.kill_all()


def metric(geo: Clusters, cluster: str, name: str) -> float:
    status, text = call(geo[cluster].web_url, "GET", "/metrics")
    assert status == 200
    found = re.search(rf"^{name}{{[^}}]*}} ([0-9.e+-]+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


PENDING = "pulsar_replicated_subscriptions_pending_snapshots"
TIMEDOUT = "pulsar_replicated_subscriptions_timedout_snapshots"


def snapshots_done(geo: Clusters, cluster: str) -> float:
    return metric(geo, cluster, "pulsar_replicated_subscriptions_snapshot_ms_count")


def produce_in_groups(geo: Clusters, producer: pulsar.Producer, count: int, snapshots_in: tuple[str, ...] = ("a",)
                      ) -> None:
    """``count`` messages in groups of GROUP; after each, every cluster of ``snapshots_in`` completes a
    snapshot started after the groups before were sent (so it covers at least them). Each group starts with
    no snapshot in progress (each ends complete or timed out): a completion from then on is of a snapshot
    started from then on. A loaded machine may time one out (2 s here); the next tick starts another while
    the new data is not covered, so the wait is for a completion, not for one particular snapshot."""
    for start in range(0, count, GROUP):
        done_before = {}
        for c in snapshots_in:
            wait_until(lambda c=c: metric(geo, c, PENDING) == 0, f"no snapshot in progress in {c}")
            done_before[c] = snapshots_done(geo, c)
        for i in range(start, min(count, start + GROUP)):
            producer.send(f"m{i}".encode())
        for c, n in done_before.items():
            wait_until(lambda c=c, n=n: snapshots_done(geo, c) > n, f"a snapshot started since completes in {c}")


def subscribe(client: pulsar.Client, topic: str, sub: str = "s",
              sub_type: pulsar.ConsumerType = pulsar.ConsumerType.Exclusive) -> pulsar.Consumer:
    return client.subscribe(topic, sub, consumer_type=sub_type, initial_position=pulsar.InitialPosition.Earliest,
                            replicate_subscription_state_enabled=True)


def ids_in(geo: Clusters, cluster: str, topic: str, count: int) -> dict[bytes, pulsar.MessageId]:
    """Each message's id in ``cluster`` (a reader from the start)."""
    with geo.client(cluster) as client:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        found = {}
        for _ in range(count):
            msg = reader.read_next(timeout_millis=30_000)
            found[msg.data()] = msg.message_id()
        reader.close()
    return found


def mark_delete(geo: Clusters, cluster: str, path: str, sub: str = "s") -> tuple[int, int] | None:
    status, body = call(geo[cluster].web_url, "GET", f"/admin/v2/persistent/{path}/internalStats")
    if status != 200 or not isinstance(body, dict) or sub not in body.get("cursors", {}):
        return None
    ledger, entry = body["cursors"][sub]["markDeletePosition"].split(":")
    return int(ledger), int(entry)


def data_after(ids: dict[bytes, pulsar.MessageId], position: tuple[int, int] | None) -> int:
    return sum(1 for m in ids.values() if (m.ledger_id(), m.entry_id()) > (position or (-1, -1)))


def wait_followed(geo: Clusters, cluster: str, path: str, ids: dict[bytes, pulsar.MessageId], floor: bytes) -> None:
    """Wait until ``cluster``'s subscription has moved (by an UPDATE) at least to the message ``floor``."""
    want = (ids[floor].ledger_id(), ids[floor].entry_id())
    wait_until(lambda: (mark_delete(geo, cluster, path) or (-1, -1)) >= want,
               f"{cluster}'s subscription at {floor!r} ({want})")


def drain(consumer: pulsar.Consumer, last: bytes, ack: bool = True) -> list[bytes]:
    """Receive (acking) until ``last`` arrives."""
    got: list[bytes] = []
    for _ in range(100_000):
        msg = consumer.receive(timeout_millis=30_000)
        if ack:
            consumer.acknowledge(msg)
        got.append(msg.data())
        if msg.data() == last:
            return got
    raise AssertionError("no end")


def take(consumer: pulsar.Consumer, n: int) -> list[bytes]:
    got = []
    for _ in range(n):
        msg = consumer.receive(timeout_millis=30_000)
        consumer.acknowledge(msg)
        got.append(msg.data())
    return got


def names(prefix: str, rng: range) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in rng]


def test_failover_between_two_clusters_resumes_with_no_loss_and_few_duplicates(geo: Clusters) -> None:
    ns = geo.namespace("two", ["a", "b"])
    path, total, acked = f"{ns}/t", 100, 55
    topic = f"persistent://{path}"
    with geo.client("a") as ca:
        consumer = subscribe(ca, topic)
        producer = ca.create_producer(topic, batching_enabled=False)
        produce_in_groups(geo, producer, total)
        assert take(consumer, acked) == names("m", range(acked))
        ids_b = ids_in(geo, "b", topic, total)
        wait_followed(geo, "b", path, ids_b, f"m{acked - 1 - DUP_BOUND}".encode())
        consumer.close()
    # b's subscription has no consumer: the markers after its position are not user backlog
    wait_until(lambda: geo.stats("b", path)["subscriptions"]["s"]["msgBacklog"] == data_after(
        ids_b, mark_delete(geo, "b", path)), "b's backlog counts messages only")
    assert geo.internal_stats("b", path)["numberOfEntries"] > total  # while markers are stored there
    with geo.client("b") as cb:
        consumer = subscribe(cb, topic)
        got = drain(consumer, f"m{total - 1}".encode())
        assert_nothing_more(consumer, 300)
    duplicates = [m for m in got if m in set(names("m", range(acked)))]
    print(f"two clusters: {len(duplicates)} duplicates after the failover a -> b")
    assert set(names("m", range(acked, total))) <= set(got)  # nothing lost
    assert len(duplicates) <= DUP_BOUND
    assert got == sorted(got, key=lambda m: int(m[1:]))  # in order, starting near the ack point
    stats = geo.stats("b", path)["subscriptions"]["s"]
    assert stats["isReplicated"] is True


def test_failover_a_to_b_to_c_with_three_clusters(geo: Clusters) -> None:
    ns = geo.namespace("three", ["a", "b", "c"])
    path, total = f"{ns}/t", 90
    topic = f"persistent://{path}"
    for name in ("b", "c"):  # the subscription exists everywhere first, so b snapshots while a produces
        with geo.client(name) as client:
            subscribe(client, topic).close()
    with geo.client("a") as ca:
        consumer = subscribe(ca, topic)
        producer = ca.create_producer(topic, batching_enabled=False)
        produce_in_groups(geo, producer, total, snapshots_in=("a", "b"))
        take(consumer, 30)
        ids_b = ids_in(geo, "b", topic, total)
        wait_followed(geo, "b", path, ids_b, f"m{29 - DUP_BOUND}".encode())
        consumer.close()
    with geo.client("b") as cb:
        consumer = subscribe(cb, topic)
        got_b = drain(consumer, b"m59")
        assert set(names("m", range(30, 60))) <= set(got_b)
        ids_c = ids_in(geo, "c", topic, total)
        wait_followed(geo, "c", path, ids_c, f"m{59 - DUP_BOUND}".encode())  # b's own snapshots carry it
        consumer.close()
    with geo.client("c") as cc:
        consumer = subscribe(cc, topic)
        got_c = drain(consumer, f"m{total - 1}".encode())
        assert_nothing_more(consumer, 300)
    dup_ab = len([m for m in got_b if m in set(names("m", range(30)))])
    dup_bc = len([m for m in got_c if m in set(names("m", range(60)))])
    print(f"three clusters: {dup_ab} duplicates a -> b, {dup_bc} duplicates b -> c")
    assert set(names("m", range(60, total))) <= set(got_c)  # nothing lost
    assert dup_ab <= DUP_BOUND and dup_bc <= DUP_BOUND


def test_shared_subscription_with_holes_resumes_at_the_first_hole(geo: Clusters) -> None:
    ns = geo.namespace("holes", ["a", "b"])
    path, total, hole = f"{ns}/t", 70, 30
    topic = f"persistent://{path}"
    with geo.client("a") as ca:
        consumer = subscribe(ca, topic, sub_type=pulsar.ConsumerType.Shared)
        producer = ca.create_producer(topic, batching_enabled=False)
        produce_in_groups(geo, producer, total)
        for _ in range(50):  # everything up to m49 except the hole m30
            msg = consumer.receive(timeout_millis=30_000)
            if msg.data() != f"m{hole}".encode():
                consumer.acknowledge(msg)
        ids_b = ids_in(geo, "b", topic, total)
        wait_followed(geo, "b", path, ids_b, f"m{hole - 1 - DUP_BOUND}".encode())
        assert mark_delete(geo, "b", path) < (ids_b[f"m{hole}".encode()].ledger_id(),
                                              ids_b[f"m{hole}".encode()].entry_id())  # never past the hole
        consumer.close()
    with geo.client("b") as cb:
        consumer = subscribe(cb, topic, sub_type=pulsar.ConsumerType.Shared)
        got = drain(consumer, f"m{total - 1}".encode())
    assert f"m{hole}".encode() in got  # the unacknowledged message is not lost
    assert set(names("m", range(50, total))) <= set(got)
    before_hole = [m for m in got if int(m[1:]) < hole]
    assert len(before_hole) <= DUP_BOUND
    print(f"shared with a hole: {len(got) - (total - 50) - 1} duplicates ({len(before_hole)} before the hole)")


def test_after_a_restart_snapshots_read_from_the_topic_still_move_the_remote(geo: Clusters) -> None:
    ns = geo.namespace("restart", ["a", "b"])
    path, total, acked = f"{ns}/t", 60, 45
    topic = f"persistent://{path}"
    with geo.client("a") as ca:
        subscribe(ca, topic).close()
        producer = ca.create_producer(topic, batching_enabled=False)
        produce_in_groups(geo, producer, total)  # snapshots are taken; nobody acknowledges
    geo["a"].kill()
    geo["a"].start()  # the snapshot caches were memory: only the SNAPSHOT markers in the topic remain
    with geo.client("a") as ca:
        consumer = subscribe(ca, topic)
        assert take(consumer, acked) == names("m", range(acked))  # nothing new is published: no new snapshot
        ids_b = ids_in(geo, "b", topic, total)
        wait_followed(geo, "b", path, ids_b, f"m{acked - 1 - DUP_BOUND}".encode())
        consumer.close()


def test_cluster_down_stops_snapshots_then_the_subscription_catches_up(geo: Clusters) -> None:
    ns = geo.namespace("down", ["a", "b"])
    path = f"{ns}/t"
    topic = f"persistent://{path}"
    with geo.client("a") as ca:
        consumer = subscribe(ca, topic)
        producer = ca.create_producer(topic, batching_enabled=False)
        produce_in_groups(geo, producer, 20)
        geo["b"].kill()
        try:
            wait_until(lambda: geo.stats("a", path)["replication"]["b"]["connected"] is False, "b disconnected")
            # a snapshot a started before it saw b go (b still answering, or dying) waits for b's answer
            # until the snapshot timeout: it never completes, it times out
            wait_until(lambda: metric(geo, "a", PENDING) == 0, "the snapshot pending at the kill timed out")
            done, timedout = snapshots_done(geo, "a"), metric(geo, "a", TIMEDOUT)
            for i in range(20, 40):
                producer.send(f"m{i}".encode())
            assert take(consumer, 40) == names("m", range(40))
            # the consumer received everything (more than a snapshot interval passed): none started since
            assert snapshots_done(geo, "a") == done
            assert metric(geo, "a", PENDING) == 0
            assert metric(geo, "a", TIMEDOUT) == timedout
            assert geo.stats("a", path)["replication"]["b"]["replicationBacklog"] >= 20  # held
        finally:
            geo["b"].start()
        wait_until(lambda: geo.stats("a", path)["replication"]["b"]["replicationBacklog"] == 0, "backlog drained")
        # snapshots resume; a's mark-delete is already past them, so b catches up to the end
        producer.send(b"m40")
        assert take(consumer, 1) == [b"m40"]
        ids_b = ids_in(geo, "b", topic, 41)
        wait_followed(geo, "b", path, ids_b, b"m40")


def test_admin_status_rest_and_cli_and_markers_never_reach_consumers(
    geo: Clusters, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = geo.namespace("admin", ["a", "b"])
    path = f"{ns}/t"
    topic = f"persistent://{path}"
    base = f"/admin/v2/persistent/{path}/subscription/s/replicatedSubscriptionStatus"
    with geo.client("a") as ca:
        plain = ca.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        assert call(geo["a"].web_url, "GET", base) == (200, {topic: False})
        plain.close()
        consumer = subscribe(ca, topic)
        assert call(geo["a"].web_url, "GET", base) == (200, {topic: True})
        producer = ca.create_producer(topic, batching_enabled=False)
        produce_in_groups(geo, producer, 20)
        assert take(consumer, 20) == names("m", range(20))  # no marker among them
        assert_nothing_more(consumer, 300)
        last, m19 = consumer.get_last_message_id(), ids_in(geo, "a", topic, 20)[b"m19"]
        assert (last.ledger_id(), last.entry_id()) == (m19.ledger_id(), m19.entry_id())  # markers come after it
        # a subscribe without the flag never turns it off; the admin does
        consumer.close()
        ca.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest).close()
        assert call(geo["a"].web_url, "GET", base)[1] == {topic: True}
        assert call(geo["a"].web_url, "POST", base, False)[0] == 204
        assert call(geo["a"].web_url, "GET", base)[1] == {topic: False}
        assert call(geo["a"].web_url, "POST", base, "yes")[0] == 400
        assert admin_main(["--admin-url", geo["a"].web_url, "topics", "set-replicated-subscription-status",
                           topic, "-s", "s", "--enable"]) == 0
        assert admin_main(["--admin-url", geo["a"].web_url, "topics", "get-replicated-subscription-status",
                           topic, "-s", "s"]) == 0
        assert "true" in capsys.readouterr().out
    # persisted as the cursor property, so a restart keeps it
    geo["a"].restart()
    assert call(geo["a"].web_url, "GET", base)[1] == {topic: True}
    props = geo.internal_stats("a", path)["cursors"]["s"].get("properties", {})
    assert props.get("pulsar.replicated.subscription") == 1


def test_markers_are_no_backlog_and_never_peeked_on_the_standby_after_a_restart(geo: Clusters) -> None:
    """Nobody reads on the standby, so nobody skips the marker copies there: after b restarts they must still
    be no backlog, and peek / examine must show the last message, not a marker."""
    ns = geo.namespace("standby", ["a", "b"])
    path = f"{ns}/t"
    topic = f"persistent://{path}"
    with geo.client("a") as ca:
        consumer = subscribe(ca, topic)
        producer = ca.create_producer(topic, batching_enabled=False)
        produce_in_groups(geo, producer, 20)
        assert take(consumer, 20) == names("m", range(20))
        ids_b = ids_in(geo, "b", topic, 20)
        wait_followed(geo, "b", path, ids_b, b"m19")
        consumer.close()
    assert geo.stats("b", path)["subscriptions"]["s"]["msgBacklog"] == 0
    geo["b"].restart()
    assert geo.stats("b", path)["subscriptions"]["s"]["msgBacklog"] == 0
    status, _ = call(geo["b"].web_url, "GET", f"/admin/v2/persistent/{path}/subscription/s/position/1")
    assert status == 404  # everything but markers is acknowledged
    status, body = call(geo["b"].web_url, "GET",
                        f"/admin/v2/persistent/{path}/examinemessage?initialPosition=latest&messagePosition=1")
    assert (status, body) == (200, "m19")
