"""Topic compaction: the latest value per key, tombstones, ``read_compacted`` and table views.

What it owns:

- ``compactor``: the two-pass compactor and the crash-safe switch to a new compacted ledger.
- ``state``: the ``__compaction`` cursor whose properties name the compacted ledger and the horizon (its
  mark-delete keeps retention from trimming what the view needs).
- ``view``: :class:`CompactedTopic`, one topic's compacted view, and the in-process API below.
- ``cursor``: :class:`CompactedCursor`, what a ``read_compacted`` subscription dispatches from.
- ``entries``: keys and tombstones inside entries, per-message batch compaction, the compacted-ledger format.
- ``service``: triggers (admin, threshold monitor), status, stats and metrics.
- ``txn``: :class:`TxnFilter`, the hook transactions plug into (aborted entries, open transactions).
- ``deleter``: the one path a compacted ledger leaves storage by (directly, or PIP-186's two phases).

It meets the topic as a topic listener (``service``: the view attached when a topic loads, detached when it
closes) and through the topic's compacted-view port (``PersistentTopic.compacted``, narrowed back to a
:class:`CompactedTopic` by :func:`compacted_of`); it never imports the dispatchers or the server.

In-process API (for broker services that keep state in a compacted topic, e.g. PIP-178's snapshots)::

    compacted = compacted_of(topic.compacted)        # the loaded PersistentTopic's CompactedTopic
    table = await compacted.latest_values()          # {key: ViewMessage(key, position, batch_index,
                                                     #                   value, properties)}
    async for entry in compacted.stream(until):      # compacted entries then the live tail, in order
        meta, messages = await compacted.visible(entry)   # keys, tombstones; markers/aborted left out

``latest_values`` reads the compacted view and then every entry written after its horizon (up to the
transaction filter's max read position), so it is the topic's current latest value per key whether or
not a compaction ran recently. Deleted keys (null-value tombstones) are absent; an empty value is kept.
"""

from magnetar.broker.compaction.cursor import CompactedCursor
from magnetar.broker.compaction.service import CompactionService, metric_values, stats_json, status_json
from magnetar.broker.compaction.state import COMPACTION_CURSOR, CompactedView, is_compaction_cursor
from magnetar.broker.compaction.txn import NoTransactions, TxnFilter
from magnetar.broker.compaction.view import CompactedTopic, ViewMessage, compacted_of

__all__ = [
    "COMPACTION_CURSOR",
    "CompactedCursor",
    "CompactedTopic",
    "CompactedView",
    "CompactionService",
    "NoTransactions",
    "TxnFilter",
    "ViewMessage",
    "compacted_of",
    "is_compaction_cursor",
    "metric_values",
    "stats_json",
    "status_json",
]
