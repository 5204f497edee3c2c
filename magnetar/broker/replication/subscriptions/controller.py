"""The replicated-subscriptions controller of one topic: starts snapshots, answers other clusters'
requests, keeps each replicated subscription's snapshot cache, writes UPDATE markers when a
subscription's mark-delete passes a snapshot, and applies UPDATE markers from other clusters.

It meets the topic through two hooks (a marker copy was stored; a subscription's mark-delete moved) and
writes markers through the replication service, whose replicators carry them.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from magnetar import protocol as proto
from magnetar.broker.replication.subscriptions import codec
from magnetar.broker.replication.subscriptions.cache import PROPERTY, Snapshot, SnapshotCache
from magnetar.broker.replication.subscriptions.rounds import PendingSnapshot, Step
from magnetar.broker.reserved import is_reserved_cursor
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.core.clock import Clock
from magnetar.ledger.api import Cursor, InitialPosition, Position

log = logging.getLogger("magnetar.broker.replicated_subscriptions")

PENDING_MAX = 16  # snapshots in progress per topic
MARKERS_TRACKED_MAX = 10_000  # marker positions kept to leave them out of backlogs (older ones count)
MARKERS_RESCAN_MAX = 1_000  # entries a load reads past the subscriptions to find the markers stored before it
_PIP33_MARKERS = frozenset({codec.REQUEST, codec.RESPONSE, codec.SNAPSHOT, codec.UPDATE})


@dataclass(slots=True)
class Totals:
    """Broker-wide figures for the metrics."""

    timedout: int = 0
    completed: int = 0
    snapshot_ms_sum: float = 0.0
    markers_written: int = 0


class TopicController:
    def __init__(
        self,
        topic: PersistentTopic,
        *,
        local_cluster: str,
        publish: Callable[[PersistentTopic, bytes], Awaitable[Position]],
        clock: Clock,
        totals: Totals,
        timeout_s: float,
        max_cached: int,
        on_busy: Callable[[TopicController], None] = lambda _: None,
    ) -> None:
        """``on_busy(self)`` is called when the controller gets work for the snapshot timer (a replicated
        subscription, a marker): the timer ticks busy controllers only, not every loaded topic."""
        self.topic = topic
        self._on_busy = on_busy
        self.local_cluster = local_cluster
        self._publish = publish
        self._clock = clock
        self._totals = totals
        self._timeout_ms = timeout_s * 1000
        self._max_cached = max_cached
        self.pending: dict[str, PendingSnapshot] = {}
        self.completing = 0  # answered snapshots whose SNAPSHOT marker is being written: still in progress
        self.completed_once = False
        self.marker_copies_in = 0
        self._data_at_last_start = -1
        self.caches: dict[str, SnapshotCache] = {}
        self._seq = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.markers: list[Position] = []  # markers stored in this topic since it loaded, sorted

    # ---- subscriptions -------------------------------------------------------------------------------

    def attach(self, sub: Subscription) -> None:
        sub.replicated = True
        sub.on_mark_delete = self.mark_delete_moved
        sub.on_marker = functools.partial(self.marker_read, sub)
        self.caches.setdefault(sub.name, SnapshotCache(self._max_cached))
        self._on_busy(self)

    def detach(self, sub: Subscription) -> None:
        sub.replicated = False
        sub.on_mark_delete = None
        sub.on_marker = None
        self.caches.pop(sub.name, None)

    def replicated_subscriptions(self) -> list[Subscription]:
        return [s for s in self.topic.subscriptions.values() if s.replicated and s.durable]

    # ---- markers are not backlog -----------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        """Nothing for the snapshot timer: no replicated subscription, pending snapshot or marker."""
        return not self.caches and not self.pending and not self.markers

    def _note_marker(self, position: Position) -> None:
        self._on_busy(self)
        bisect.insort(self.markers, position)
        if len(self.markers) > MARKERS_TRACKED_MAX:
            del self.markers[0]

    def markers_ahead(self, cursor: Cursor) -> int:
        """Marker entries after ``cursor``'s mark-delete it has not passed (the topic's hook for backlogs)."""
        start = bisect.bisect_right(self.markers, cursor.mark_delete_position)
        return sum(1 for p in self.markers[start:] if not cursor.is_acknowledged(p))

    async def recover_markers(self) -> None:
        """Note the markers stored before this load that a durable subscription has not passed: on a standby
        nobody reads, so nobody skips them, and they would count as backlog. Only a replicated topic or one with a
        replicated subscription looks, and it reads at most MARKERS_RESCAN_MAX entries from the lowest
        mark-delete (a backlog longer than that is data, whatever markers it holds)."""
        cursors = [s.cursor for s in self.topic.subscriptions.values() if s.durable]
        if not cursors or not (self.caches or self.topic.extensions.replicators):  # no marker comes here
            return
        ledger = self.topic.ledger
        position = ledger.next_valid_position(min(c.mark_delete_position for c in cursors))
        found: list[Position] = []
        for _ in range(MARKERS_RESCAN_MAX):
            if position > ledger.last_confirmed or self.topic.closed:
                break
            try:
                entry = await ledger.read_entry(position)
            except Exception as exc:  # a read the load cannot do leaves the older markers counted, as before
                log.warning("%s: markers before %s are not looked for: %s", self.topic.name, position, exc)
                break
            meta = proto.parse_entry_metadata(entry.data)
            if meta.HasField("marker_type") and meta.marker_type in _PIP33_MARKERS:
                found.append(entry.position)
            position = ledger.next_valid_position(position)
        known = set(self.markers)
        for marker in found:
            if marker not in known:
                self._note_marker(marker)

    def _forget_passed_markers(self) -> None:
        """Markers every durable subscription passed are nobody's backlog any more. A reader's position does not
        count: a durable subscription created after it (by a client, or by another cluster's update) may start
        before what the reader read, and then still needs them."""
        cursors = [s.cursor for s in self.topic.subscriptions.values() if s.durable]
        if not cursors:  # a subscription created later (at the earliest position) still needs them
            return
        lowest = min(c.mark_delete_position for c in cursors)
        del self.markers[: bisect.bisect_right(self.markers, lowest)]

    # ---- starting snapshots --------------------------------------------------------------------------

    def _data_published(self) -> int:
        """Messages stored that are not marker copies: what a new snapshot could cover."""
        return self.topic.msg_in_counter - self.marker_copies_in

    def expire(self) -> None:
        now = self._clock.monotonic_ms()
        for sid, pending in list(self.pending.items()):
            if now - pending.started_ms > self._timeout_ms:
                del self.pending[sid]
                self._totals.timedout += 1
                log.info("%s: snapshot %s timed out waiting for %s", self.topic.name, sid, sorted(pending.awaiting))

    def skip_reason(self) -> str | None:
        if not self.replicated_subscriptions():
            return "no replicated subscription"
        if not self.topic.replicators:
            return "no remote cluster"
        if self.pending and not self.completed_once:
            return "a snapshot is pending and none completed yet"
        if len(self.pending) >= PENDING_MAX:
            return "too many snapshots pending"
        if self.completed_once and self._data_published() == self._data_at_last_start:
            return "nothing new published since the last snapshot"
        if not all(r.connected for r in self.topic.replicators.values()):
            return "a replicator is disconnected"
        return None

    def tick(self) -> None:
        """Every snapshot interval: drop timed-out snapshots, then start one unless a rule says no."""
        self.expire()
        self._forget_passed_markers()
        if self.topic.closed or self.skip_reason() is not None:
            return
        sid = str(uuid.uuid4())
        self.pending[sid] = PendingSnapshot(
            sid, frozenset(self.topic.replicators), self._clock.monotonic_ms(), data_mark=self._data_published())
        self._spawn(self._write(codec.REQUEST, codec.request(sid, self.local_cluster), ()))

    # ---- writing markers -----------------------------------------------------------------------------

    def _spawn(self, work: Awaitable[object]) -> None:
        async def run() -> None:
            try:
                await work
            except Exception as exc:  # a failed marker write only costs a snapshot or an update
                log.warning("%s: replicated-subscription marker failed: %r", self.topic.name, exc)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, marker_type: int, payload: bytes, replicate_to: tuple[str, ...]) -> Position:
        # replicated copies are deduplicated by sequence id on the remote: keep them increasing, restarts too
        self._seq = max(self._seq + 1, self._clock.now_ms() * 1000)
        entry = proto.markers.make_marker_entry(
            marker_type, payload, publish_time_ms=self._clock.now_ms(), sequence_id=self._seq,
            replicate_to=replicate_to)
        position = await self._publish(self.topic, entry)
        self._note_marker(position)
        self._totals.markers_written += 1
        return position

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ---- markers that arrived from other clusters ----------------------------------------------------

    def marker_stored(self, position: Position, metadata: proto.pb.MessageMetadata, entry: bytes) -> None:
        """A marker copy from another cluster is stored here at ``position`` (the topic's hook)."""
        self.marker_copies_in += 1
        self._note_marker(position)
        payload = bytes(proto.entry_payload(entry))
        try:
            if metadata.marker_type == codec.REQUEST:
                sid, source = codec.parse_request(payload)
                last = self.topic.ledger.last_confirmed
                self._spawn(self._write(codec.RESPONSE, codec.response(sid, self.local_cluster, last), (source,)))
            elif metadata.marker_type == codec.RESPONSE:
                self._response(position, *codec.parse_response(payload))
            elif metadata.marker_type == codec.UPDATE:
                name, clusters = codec.parse_update(payload)
                if self.local_cluster in clusters:
                    self._spawn(self.apply_update(name, clusters[self.local_cluster]))
        except Exception as exc:  # a malformed marker from a peer is dropped, never fatal
            log.warning("%s: ignoring a malformed marker (type %d) at %s: %r", self.topic.name,
                        metadata.marker_type, position, exc)

    def _response(self, position: Position, sid: str, cluster: str, remote: Position) -> None:
        pending = self.pending.get(sid)
        if pending is None:
            return  # not ours, timed out, or already complete
        step = pending.receive(cluster, remote, position)
        if step is Step.SECOND_ROUND:
            self._spawn(self._write(codec.REQUEST, codec.request(sid, self.local_cluster), ()))
        elif step is Step.COMPLETE:
            del self.pending[sid]
            self._spawn(self._complete(pending))

    @property
    def in_progress(self) -> int:
        """Snapshots started and not yet completed or timed out. A snapshot leaves this count in the same step
        as it enters the completed or the timed-out total, so started = completed + timed out + in progress
        (less any whose SNAPSHOT marker could not be written: dropped, with the write's error logged)."""
        return len(self.pending) + self.completing

    async def _complete(self, pending: PendingSnapshot) -> None:
        snap = pending.snapshot()
        self.completing += 1
        try:
            await self._write(codec.SNAPSHOT, codec.snapshot(snap.snapshot_id, snap.local, snap.clusters),
                              (self.local_cluster,))
        finally:
            self.completing -= 1
        # complete only once persisted
        self.completed_once = True
        self._data_at_last_start = max(self._data_at_last_start, pending.data_mark)
        self._totals.completed += 1
        self._totals.snapshot_ms_sum += self._clock.monotonic_ms() - pending.started_ms
        log.debug("%s: snapshot %s complete: local %s, %s", self.topic.name, snap.snapshot_id, snap.local,
                  {c: str(p) for c, p in snap.clusters.items()})
        for sub in self.replicated_subscriptions():
            self.caches.setdefault(sub.name, SnapshotCache(self._max_cached)).add(snap)
            if sub.cursor.mark_delete_position >= snap.local:  # already past it: the update goes out now
                self.mark_delete_moved(sub)

    def marker_read(self, sub: Subscription, position: Position, metadata: proto.pb.MessageMetadata,
                    data: bytes) -> None:
        """The subscription's dispatcher skipped a marker: a SNAPSHOT joins its cache (after a restart this is
        how snapshots taken before it come back)."""
        if metadata.marker_type != codec.SNAPSHOT or not sub.replicated:
            return
        try:
            sid, local, clusters = codec.parse_snapshot(bytes(proto.entry_payload(data)))
        except Exception as exc:
            log.warning("%s: ignoring a malformed snapshot marker at %s: %r", self.topic.name, position, exc)
            return
        self.caches.setdefault(sub.name, SnapshotCache(self._max_cached)).add(Snapshot(sid, local, clusters))
        if sub.cursor.mark_delete_position >= local:
            self.mark_delete_moved(sub)

    # ---- updates -------------------------------------------------------------------------------------

    def mark_delete_moved(self, sub: Subscription) -> None:
        """The subscription's hook: the newest snapshot it passed becomes an UPDATE for every cluster."""
        cache = self.caches.get(sub.name)
        if cache is None or not sub.replicated:
            return
        snap: Snapshot | None = cache.advanced_to(sub.cursor.mark_delete_position)
        if snap is not None:
            self._spawn(self._write(codec.UPDATE, codec.update(sub.name, snap.clusters), ()))

    async def apply_update(self, name: str, position: Position) -> None:
        """Another cluster's subscription passed a snapshot: move ours forward to ``position``, never back."""
        if is_reserved_cursor(name):
            log.warning("%s: ignoring an update for the reserved cursor %s", self.topic.name, name)
            return
        sub = self.topic.subscriptions.get(name)
        if sub is None:  # as Pulsar does: the subscription exists on another cluster, so it is created here
            cursor = await self.topic.ledger.open_cursor(name, InitialPosition.EARLIEST)
            if name not in self.topic.subscriptions:  # else subscribed meanwhile
                log.info("%s: subscription %s created by a replicated-subscription update", self.topic.name, name)
                sub = self.topic.add_durable_subscription(name, cursor)
                await sub.cursor.set_properties({PROPERTY: 1})
                self.attach(sub)
            sub = self.topic.subscriptions[name]
        if not sub.durable or not sub.replicated:
            return  # an update moves only subscriptions that replicate their state
        target = min(position, self.topic.ledger.last_confirmed)
        if target > sub.cursor.mark_delete_position:
            sub.cursor.acknowledge_cumulative(target)
            log.debug("%s: subscription %s moved to %s by an update", self.topic.name, name, target)
            sub.new_entries()
