"""One replicator: a local topic's entries copied to the same topic in one remote cluster.

The durable cursor ``pulsar.repl.{remote}`` holds what is not yet stored on the remote: an entry is
acknowledged on it only after the remote's receipt, so a remote that is down or slow only grows the
backlog, and a crash resends from the cursor (the remote's deduplication, keyed by the original producer
name and sequence id, drops what had landed already). Only locally originated entries go out
(``replicated_from`` empty), with ``replicated_from`` set to the local cluster and ``replicate_to``
honoured; everything else is acknowledged at once so it never holds the backlog.

Lifecycle: STARTING → CONNECTED ⇄ DISCONNECTED → STOPPED; a failed producer is replaced after a bounded
exponential backoff. Knows the entry format, never sockets: the producer comes from a
:class:`~magnetar.broker.replication.api.RemoteProducerFactory`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import random
from typing import Any, Final, Protocol

from magnetar import protocol as proto
from magnetar.broker.replication.api import (
    ClusterData,
    RemoteProducer,
    RemoteProducerFactory,
    producer_name,
)
from magnetar.broker.subscription.dispatcher import GATE_DROP, EntryGate
from magnetar.core.clock import Clock
from magnetar.core.lifecycle import Transitions
from magnetar.ledger.api import Cursor, Entry, EntryCorruptedError, ManagedLedger, ManagedLedgerError, Position

log = logging.getLogger("magnetar.broker.replication")

TXN_MARKERS: Final = frozenset({proto.markers.TXN_COMMITTING, proto.markers.TXN_COMMIT, proto.markers.TXN_ABORT})
BACKOFF_INITIAL_MS: Final = 100
BACKOFF_MAX_MS: Final = 60_000
READ_BATCH_MAX: Final = 100


class ReplicatedTopic(Protocol):
    """What a replicator reads from its topic (PersistentTopic has it)."""

    @property
    def closed(self) -> bool: ...

    @property
    def partition(self) -> int: ...

    @property
    def ledger(self) -> ManagedLedger: ...


class ReplicatorState(enum.Enum):
    STARTING = "starting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    STOPPED = "stopped"


_R = ReplicatorState
REPLICATOR_TRANSITIONS: Final = Transitions(ReplicatorState, {
    _R.STARTING: {_R.CONNECTED, _R.DISCONNECTED, _R.STOPPED},
    _R.CONNECTED: {_R.DISCONNECTED, _R.STOPPED},
    _R.DISCONNECTED: {_R.CONNECTED, _R.STOPPED},
    _R.STOPPED: set(),
})


def should_replicate(metadata: proto.pb.MessageMetadata, remote_cluster: str) -> bool:
    """Locally originated, not a transaction marker, and not restricted away from ``remote_cluster``."""
    if metadata.replicated_from:
        return False  # it came from another cluster: never copied on (no loops)
    if metadata.HasField("marker_type") and metadata.marker_type in TXN_MARKERS:
        return False
    return not metadata.replicate_to or remote_cluster in metadata.replicate_to


def replicated_entry(data: bytes, metadata: proto.pb.MessageMetadata, local_cluster: str) -> bytes:
    """The entry as the remote stores it: the same metadata and payload, ``replicated_from`` set."""
    copy = proto.pb.MessageMetadata()
    copy.CopyFrom(metadata)
    copy.replicated_from = local_cluster
    # a committed transaction's message lands on the remote as a plain one: the remote knows no such txn
    copy.ClearField("txnid_most_bits")
    copy.ClearField("txnid_least_bits")
    return proto.make_entry(copy, proto.entry_payload(data))


class Replicator:
    def __init__(
        self,
        topic: ReplicatedTopic,
        topic_name: str,
        cursor: Cursor,
        *,
        local_cluster: str,
        cluster: ClusterData,
        factory: RemoteProducerFactory,
        clock: Clock,
        queue_size: int = 1000,
        partitioned_parent: tuple[str, int] | None = None,
        gate: EntryGate | None = None,
    ) -> None:
        self.topic = topic
        self.topic_name = topic_name
        self.cursor = cursor
        self.local_cluster = local_cluster
        self.cluster = cluster
        self.producer_name = producer_name(local_cluster, cluster.name)
        self._factory = factory
        self._clock = clock
        self._queue_size = max(1, queue_size)
        self._partitioned_parent = partitioned_parent
        self._gate = gate  # transactions: read only up to the max read position; skip aborted entries
        self.state = ReplicatorState.STARTING
        self._producer: RemoteProducer | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopped = asyncio.Event()
        self._failure: BaseException | None = None
        self._in_flight: dict[Position, int] = {}  # position -> publish time (ms), in send order
        self.msg_out_counter = 0
        self.bytes_out_counter = 0
        self.connected_since_ms: int | None = None
        self._oldest_unreplicated_ms: int | None = None

    @property
    def remote_cluster(self) -> str:
        return self.cluster.name

    @property
    def connected(self) -> bool:
        """True while a producer on the remote is ready (replicated subscriptions ask this)."""
        return self._producer is not None and self._producer.connected

    @property
    def remote_address(self) -> str:
        return self.cluster.broker_service_url

    @property
    def stopped(self) -> bool:
        return self.state is ReplicatorState.STOPPED

    def backlog(self) -> int:
        return self.cursor.backlog_entries()

    def delay_s(self) -> float:
        """How long the oldest entry not yet on the remote has waited (0 with no backlog)."""
        if self._oldest_unreplicated_ms is None or self.backlog() == 0:
            return 0.0
        return max(0.0, (self._clock.now_ms() - self._oldest_unreplicated_ms) / 1000)

    def _transition_to(self, state: ReplicatorState) -> None:
        if state is not self.state:
            self.state = REPLICATOR_TRANSITIONS.check(self.state, state, f"replicator to {self.remote_cluster}")

    # ---- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replicator {self}")

    def wake(self) -> None:
        """New entries were stored (the topic calls this) or something else changed."""
        self._wake.set()

    async def stop(self) -> None:
        if self.state is ReplicatorState.STOPPED:
            return
        self._transition_to(ReplicatorState.STOPPED)
        self._stopped.set()
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close_producer()

    def __str__(self) -> str:
        return f"{self.topic_name} {self.local_cluster}-->{self.remote_cluster}"

    async def _run(self) -> None:
        delay_ms = BACKOFF_INITIAL_MS
        while self.state is not ReplicatorState.STOPPED and not self.topic.closed:  # ends on stop
            try:
                producer = await self._connect()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.stopped:  # stop() came while connecting
                    return
                self._transition_to(ReplicatorState.DISCONNECTED)
                log.warning("replicator %s: cannot reach the remote (%r); retry in %d ms", self, exc, delay_ms)
                await self._note_oldest_unreplicated()
                await self._pause(delay_ms)
                delay_ms = min(delay_ms * 2, BACKOFF_MAX_MS)
                continue
            delay_ms = BACKOFF_INITIAL_MS
            try:
                await self._pump(producer)
            except (ManagedLedgerError, proto.ProtocolError) as exc:
                log.error("replicator %s stops reading: %r", self, exc)
                await self._pause(BACKOFF_MAX_MS)
            except Exception:  # never let a bug end replication silently: log, back off, start over
                log.exception("replicator %s failed; starting over", self)
                await self._pause(BACKOFF_MAX_MS)
            finally:
                await self._close_producer()
            if self.state is ReplicatorState.CONNECTED:
                self._transition_to(ReplicatorState.DISCONNECTED)
            await self._pause(delay_ms)

    async def _connect(self) -> RemoteProducer:
        if self._partitioned_parent is not None:
            parent, partitions = self._partitioned_parent
            await self._factory.ensure_partitioned_topic(self.cluster, parent, partitions)
        producer = await self._factory.create_producer(
            self.cluster, self.topic_name, self.producer_name, queue_size=self._queue_size
        )
        if self.state is ReplicatorState.STOPPED:
            await producer.close()
            raise asyncio.CancelledError
        self._producer = producer
        self._failure = None
        self.connected_since_ms = self._clock.now_ms()
        self._transition_to(ReplicatorState.CONNECTED)
        log.info("replicator %s connected", self)
        return producer

    async def _note_oldest_unreplicated(self) -> None:
        """While the remote is unreachable nothing is in flight: the delay is the first backlog entry's age."""
        if self._oldest_unreplicated_ms is not None or self.backlog() == 0:
            return
        with contextlib.suppress(ManagedLedgerError, proto.ProtocolError):
            first = self.topic.ledger.next_valid_position(self.cursor.mark_delete_position)
            entry = await self.topic.ledger.read_entry(first)
            self._oldest_unreplicated_ms = int(proto.parse_entry_metadata(entry.data).publish_time)

    async def _pause(self, delay_ms: float) -> None:
        jittered = delay_ms * (1 - 0.1 * random.random())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), jittered / 1000)

    async def _close_producer(self) -> None:
        producer, self._producer = self._producer, None
        self.connected_since_ms = None
        if producer is not None:
            with contextlib.suppress(Exception):
                await producer.close()
        self._in_flight.clear()

    # ---- copying -------------------------------------------------------------------------------------

    async def _pump(self, producer: RemoteProducer) -> None:
        """Read from the cursor and send, at most ``queue_size`` entries in flight, until a send fails."""
        self.cursor.rewind()  # everything not acknowledged goes again: the remote drops what it has
        while self.state is ReplicatorState.CONNECTED and self._failure is None and not self.topic.closed:
            self._wake.clear()
            room = self._queue_size - len(self._in_flight)
            entries = await self._read(min(room, READ_BATCH_MAX)) if room > 0 else []
            if not entries:
                await self._wake.wait()  # new entries, room, a failure or stop
                continue
            for entry in entries:
                if self._failure is not None:
                    break
                self._replicate(producer, entry)
        if self._failure is not None:
            log.warning("replicator %s: the remote producer failed (%r); reconnecting", self, self._failure)

    async def _read(self, count: int) -> list[Entry]:
        try:
            limit = self._gate.max_read_position() if self._gate is not None else None
            return await self.cursor.read_entries(count, max_position=limit)
        except EntryCorruptedError as exc:
            log.error("replicator %s skips corrupted entry %s", self, exc.position)
            self.cursor.acknowledge([exc.position])
            self.cursor.seek(exc.position)
            return []

    def _replicate(self, producer: RemoteProducer, entry: Entry) -> None:
        metadata = proto.parse_entry_metadata(entry.data)
        aborted = self._gate is not None and self._gate.verdict(entry.position, metadata) == GATE_DROP
        if aborted or not should_replicate(metadata, self.remote_cluster):
            self.cursor.acknowledge([entry.position])
            return
        data = replicated_entry(entry.data, metadata, self.local_cluster)
        batch = metadata.HasField("num_messages_in_batch")
        count = max(1, metadata.num_messages_in_batch) if batch else 1
        try:
            future = producer.send_entry(
                data, num_messages=count if batch else None, is_chunk=metadata.HasField("chunk_id"),
                marker=metadata.HasField("marker_type"),
            )
        except Exception as exc:  # the producer can no longer send: a new one resends from the cursor
            if self._failure is None:
                self._failure = exc
            return
        self._in_flight[entry.position] = int(metadata.publish_time)
        if self._oldest_unreplicated_ms is None:
            self._oldest_unreplicated_ms = int(metadata.publish_time)
        future.add_done_callback(functools.partial(self._sent, producer, entry.position, count, len(data)))

    def _sent(self, producer: RemoteProducer, position: Position, count: int, size: int, future: Any) -> None:
        self._in_flight.pop(position, None)
        error = future.exception() if not future.cancelled() else asyncio.CancelledError()
        if error is not None:
            if producer is self._producer and self._failure is None:
                self._failure = error
            self._wake.set()
            return
        self.cursor.acknowledge([position])  # stored on the remote: no longer backlog
        self.msg_out_counter += count
        self.bytes_out_counter += size
        self._oldest_unreplicated_ms = next(iter(self._in_flight.values()), None)
        self._wake.set()
