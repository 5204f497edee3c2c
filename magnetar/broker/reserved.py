"""Reserved cursor names: the broker's own cursors, never subscriptions.

Broker services keep cursors on a topic's managed ledger for their own bookkeeping (deduplication's
``pulsar.dedup``; replication's ``pulsar.repl.<cluster>``; compaction's ``__compaction``). Such a cursor
must not be created, moved, skipped, reset or deleted by a client or the admin API: moving the dedup
cursor lets a resend land twice after a crash. This module is the one place that says which names are
reserved: a service whose cursor is not covered here adds it to this declaration, never at run time.
"""

from __future__ import annotations

_PREFIXES = ("pulsar.",)  # pulsar.dedup, pulsar.repl.<cluster>, ... (Pulsar's system cursors)
_NAMES = frozenset({"__compaction"})


def is_reserved_cursor(name: str) -> bool:
    """True for a cursor the broker keeps for itself: not a subscription."""
    return name in _NAMES or name.startswith(_PREFIXES)
