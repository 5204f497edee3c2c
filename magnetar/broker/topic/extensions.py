"""The ports features plug into a topic: what the topic calls out to, and the slots that hold them.

A topic calls its features through these protocols only, so it imports none of them:

- :class:`TxnPort`: the topic's transactions (``broker/transactions/topic_txn.py``): a SEND's metadata, the
  isolation gate of each subscription, what a reader may see last, recovery, close and deletion;
- :class:`CompactedPort`: the compacted view a ``read_compacted`` subscription dispatches from
  (``broker/compaction/``);
- :class:`ReplicatorView`: a replicator reading the topic for another cluster (``broker/replication/``);
- marker hooks (PIP-33, ``broker/replicated_subscriptions/``): a marker copy from another cluster was
  stored; how many marker entries a cursor has not passed (they are not user backlog).

A feature fills a slot through :class:`TopicExtensions`' methods when the registry tells it the topic
loaded, and empties it when the topic closes (:mod:`magnetar.broker.topic.listener`). A feature that needs
its own concrete object back narrows the port (``isinstance``) in its own package.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from magnetar import protocol as proto
from magnetar.broker.subscription.dispatcher import EntryGate
from magnetar.ledger.api import Cursor, Position

Started = TypeVar("Started")

MarkerStored = Callable[[Position, proto.pb.MessageMetadata, bytes], None]
MarkersAhead = Callable[[Cursor], int]


class TxnBufferPort(Protocol):
    def note_appended(self) -> None:
        """An entry was stored: bounds what a recovery after a crash replays."""
        ...

    def ongoing(self) -> Mapping[Any, Position]:
        """The open transactions that wrote here (an idle topic has none)."""
        ...


class TxnPort(Protocol[Started]):
    """A topic's transactions: its transaction buffer and its subscriptions' pending-ack stores."""

    @property
    def buffer(self) -> TxnBufferPort: ...

    def gate(self, subscription: str) -> EntryGate:
        """Transaction isolation for one subscription's dispatchers."""
        ...

    def send_started(self, metadata: proto.pb.MessageMetadata) -> Started | None:
        """A SEND's metadata: its transaction (None: not transactional); raises when refused."""
        ...

    def watch_send(self, started: Started, result: asyncio.Future[Position]) -> None: ...

    async def last_visible(self, last: Position) -> Position:
        """The last position a reader may see: not past an open transaction, a marker or an aborted entry."""
        ...

    async def recover(self) -> None: ...

    async def close(self) -> None: ...

    async def topic_deleted(self) -> None:
        """The topic is deleted: its pending-ack logs and buffer snapshot go too."""
        ...

    async def subscription_deleted(self, subscription: str) -> None: ...


class CompactedPort(Protocol):
    """A topic's compacted view, as subscriptions and GET_LAST_MESSAGE_ID see it."""

    def reading_cursor(self, cursor: Cursor, start: Position | None, *, from_start: bool) -> Cursor: ...

    async def last_message_id(self, live: Position, live_batch_index: int) -> tuple[Position, int]: ...


class ReplicatorView(Protocol):
    """What a topic, its stats and the replicated-subscriptions service see of a replicator."""

    @property
    def remote_cluster(self) -> str: ...

    @property
    def connected(self) -> bool: ...

    @property
    def producer_name(self) -> str: ...

    @property
    def msg_out_counter(self) -> int: ...

    @property
    def bytes_out_counter(self) -> int: ...

    @property
    def connected_since_ms(self) -> int | None: ...

    @property
    def remote_address(self) -> str: ...

    def backlog(self) -> int: ...

    def delay_s(self) -> float: ...

    def wake(self) -> None:
        """New entries are stored: read them."""
        ...

    async def stop(self) -> None: ...


def _no_markers(_cursor: Cursor) -> int:
    return 0


class TopicExtensions:
    """The slots of one topic that features fill; each feature fills and empties its own."""

    __slots__ = ("_compacted", "_replicators", "marker_stored", "markers_ahead")

    def __init__(self) -> None:
        self._replicators: dict[str, ReplicatorView] = {}
        self._compacted: CompactedPort | None = None
        self.marker_stored: MarkerStored | None = None
        self.markers_ahead: MarkersAhead = _no_markers

    # ---- replication ------------------------------------------------------------------------------------

    @property
    def replicators(self) -> Mapping[str, ReplicatorView]:
        """By remote cluster."""
        return self._replicators

    def add_replicator(self, cluster: str, replicator: ReplicatorView) -> None:
        self._replicators[cluster] = replicator

    def remove_replicator(self, cluster: str) -> ReplicatorView | None:
        return self._replicators.pop(cluster, None)

    def wake_replicators(self) -> None:
        for replicator in self._replicators.values():
            replicator.wake()

    # ---- compaction -------------------------------------------------------------------------------------

    @property
    def compacted(self) -> CompactedPort | None:
        return self._compacted

    def attach_compacted(self, view: CompactedPort | None) -> None:
        self._compacted = view

    # ---- PIP-33 markers ---------------------------------------------------------------------------------

    def set_marker_hooks(self, stored: MarkerStored | None, ahead: MarkersAhead | None) -> None:
        self.marker_stored = stored
        self.markers_ahead = ahead if ahead is not None else _no_markers
