"""PIP-33 pieces without a broker: the snapshot cache, the request/response rounds, the marker codec and
the controller's skip rules (over the simulator's in-memory cluster)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from magnetar import protocol as proto
from magnetar.broker.replication.subscriptions import codec
from magnetar.broker.replication.subscriptions.cache import Snapshot, SnapshotCache
from magnetar.broker.replication.subscriptions.rounds import PendingSnapshot, Step
from magnetar.config import build_settings
from magnetar.ledger.api import Position
from tests.sim.repl_sub_world import SUB, SimCursor, SimSubscription, World


def P(entry: int) -> Position:
    return Position(1, entry)


def snap(entry: int) -> Snapshot:
    return Snapshot(f"s{entry}", P(entry), {"b": P(entry * 10)})


def test_cache_keeps_first_and_last_when_full_and_hands_out_the_newest_passed() -> None:
    cache = SnapshotCache(3)
    for e in (1, 2, 3, 10, 11):  # full at 3: 2 goes (1..3 closest), then 10 (3..11 closer than 1..10)
        cache.add(snap(e))
    assert len(cache) == 3
    assert cache.advanced_to(P(0)) is None
    found = cache.advanced_to(P(10))
    assert found is not None and found.local == P(3)  # first (1) and last (11) were kept
    assert len(cache) == 1
    cache.add(snap(2))  # older than what is cached: ignored
    assert len(cache) == 1 and cache.advanced_to(P(100)) == snap(11)


def test_two_clusters_take_one_round() -> None:
    pending = PendingSnapshot("x", frozenset({"b"}), 0)
    assert pending.receive("c", P(1), P(2)) is Step.WAIT  # a stranger
    assert pending.receive("b", P(7), P(3)) is Step.COMPLETE
    assert pending.snapshot() == Snapshot("x", P(3), {"b": P(7)})


def test_three_clusters_take_two_rounds_remote_positions_from_the_first_local_from_the_second() -> None:
    pending = PendingSnapshot("x", frozenset({"b", "c"}), 0)
    assert pending.receive("b", P(10), P(3)) is Step.WAIT
    assert pending.receive("b", P(11), P(4)) is Step.WAIT  # a repeat
    assert pending.receive("c", P(20), P(5)) is Step.SECOND_ROUND
    assert pending.receive("c", P(21), P(8)) is Step.WAIT
    with pytest.raises(AssertionError, match="partial"):
        pending.snapshot()
    assert pending.receive("b", P(12), P(9)) is Step.COMPLETE
    assert pending.snapshot() == Snapshot("x", P(9), {"b": P(10), "c": P(20)})


def test_codec_round_trips_every_marker() -> None:
    assert codec.parse_request(codec.request("id", "a")) == ("id", "a")
    assert codec.parse_response(codec.response("id", "b", P(4))) == ("id", "b", P(4))
    assert codec.parse_update(codec.update("s", {"b": P(1), "c": P(2)})) == ("s", {"b": P(1), "c": P(2)})


def _world() -> World:
    world = World(1, ("a", "b"))
    asyncio.run(world.subscribe(world.clusters["a"]))
    return world


def test_skip_rules() -> None:
    asyncio.run(_skip_rules())


async def _skip_rules() -> None:
    world = World(1, ("a", "b"))
    await world.subscribe(world.clusters["a"])
    a = world.clusters["a"]
    ctrl = a.controller
    assert ctrl.skip_reason() is None
    ctrl.tick()
    await world.settle()
    assert len(ctrl.pending) == 1
    assert ctrl.skip_reason() == "a snapshot is pending and none completed yet"
    for _ in range(2):  # the request to b, b's response back: the snapshot completes
        world.step_copy()
        await world.settle()
    assert not ctrl.pending and ctrl.completed_once and world.totals.completed == 1
    assert ctrl.caches["s"].advanced_to(P(100)) is not None
    assert ctrl.skip_reason() == "nothing new published since the last snapshot"
    a.msg_in_counter += 1  # a message is published
    a.replicators["b"].connected = False
    assert ctrl.skip_reason() == "a replicator is disconnected"
    a.replicators["b"].connected = True
    assert ctrl.skip_reason() is None
    ctrl.tick()
    world.clock.advance(6000)
    ctrl.expire()
    assert not ctrl.pending and world.totals.timedout == 1


def test_a_snapshot_is_in_progress_until_its_marker_is_written() -> None:
    asyncio.run(_in_progress_until_written())


async def _in_progress_until_written() -> None:
    """Between b's answer and the persisted SNAPSHOT marker a snapshot is neither pending an answer nor
    completed: it still counts as in progress (the pending-snapshots metric), so started = completed +
    timed out + in progress at every moment."""
    world = World(1, ("a", "b"))
    await world.subscribe(world.clusters["a"])
    ctrl = world.clusters["a"].controller
    written = asyncio.Event()

    async def snapshot_waits(topic: object, data: bytes) -> Position:
        if proto.parse_entry_metadata(data).marker_type == codec.SNAPSHOT:
            await written.wait()
        return await world.publish(topic, data)  # type: ignore[arg-type]

    ctrl._publish = snapshot_waits
    ctrl.tick()
    await world.settle()
    world.step_copy()  # the request to b
    await world.settle()
    assert ctrl.in_progress == 1 and len(ctrl.pending) == 1
    world.step_copy()  # b's response: complete, its SNAPSHOT marker being written
    for _ in range(3):
        await asyncio.sleep(0)
    assert not ctrl.pending and ctrl.in_progress == 1 and world.totals.completed == 0
    written.set()
    await world.settle()
    assert ctrl.in_progress == 0 and world.totals.completed == 1 and world.totals.timedout == 0


def test_markers_a_reader_passed_stay_hidden_from_a_subscription_created_later() -> None:
    asyncio.run(_reader_passed_markers())


async def _reader_passed_markers() -> None:
    """b holds a's snapshot request and its own response before any durable subscription exists there; a
    reader reads past them; then a's update creates the subscription at the start: its backlog is the data only
    (the timer's pass between must not forget markers only the reader passed)."""
    world = World(1, ("a", "b"))
    await world.subscribe(world.clusters["a"])
    a, b = world.clusters["a"], world.clusters["b"]
    world.step_publish()  # a message (in a or b: either way b stores one)
    a.msg_in_counter += 1
    a.controller.tick()
    await world.settle()
    for _ in range(4):  # every link drains: the data, a's request, b's response
        world.step_copy()
        await world.settle()
    markers = sum(1 for entry in b.log if entry.marker)
    assert markers >= 1 and len(b.controller.markers) == markers
    reader = SimSubscription("reader", SimCursor(b.log))
    reader.durable = False
    reader.cursor.acknowledge_cumulative(b.ledger.last_confirmed)
    b.subscriptions["reader"] = reader
    b.controller.tick()  # the timer's pass: only the reader passed the markers
    later = b.add_durable_subscription(SUB, SimCursor(b.log))
    assert b.controller.markers_ahead(later.cursor) == markers  # type: ignore[arg-type]


def test_a_malformed_marker_from_a_peer_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    world = _world()
    metadata = proto.pb.MessageMetadata(producer_name="x", sequence_id=1, publish_time=1,
                                        marker_type=codec.UPDATE, replicated_from="b")
    entry = proto.make_entry(metadata, b"\xff\xff not a protobuf")
    with caplog.at_level(logging.WARNING, logger="magnetar"):
        world.clusters["a"].controller.marker_stored(P(0), metadata, entry)
    assert "malformed marker" in caplog.text


def test_config_keys_take_pulsar_names_and_units() -> None:
    broker = build_settings({
        "enableReplicatedSubscriptions": "false", "replicatedSubscriptionsSnapshotFrequencyMillis": "250",
        "replicatedSubscriptionsSnapshotTimeoutSeconds": "7",
        "replicatedSubscriptionsSnapshotMaxCachedPerSubscription": "12",
    }).broker
    assert broker.enable_replicated_subscriptions is False
    assert broker.replicated_subscriptions_snapshot_frequency_millis == 250
    assert broker.replicated_subscriptions_snapshot_timeout_seconds == 7
    assert broker.replicated_subscriptions_snapshot_max_cached_per_subscription == 12
