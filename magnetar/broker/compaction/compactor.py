"""The two-pass compactor.

Pass 1 reads what a compacted reader from the start sees (the current compacted view, then the topic up to
a cut-off, the horizon) and keeps, per key, the position and batch index of its latest message; a tombstone
removes the key, keyless messages, markers and aborted transactional messages count for nothing. Pass 2
reads again only the entries that hold a latest message and writes them to a new compacted ledger (a batch
keeps only its still-latest indexes). The switch then writes the new ledger, its entry count and the
horizon into the ``__compaction`` cursor in one metadata write, moves the cursor's mark-delete to the
horizon (retention may now trim what the view covers), and deletes the replaced ledger.

Crash safety: a compaction first sets the cursor's ``running`` flag and, before pass 2 writes anything,
records the new ledger's id as ``pending``; a restart deletes a pending ledger and, while ``running`` is
set, runs the compaction again. Until the switch's single write lands, readers and a restart
see the old view; after it, the new one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from magnetar import protocol as proto
from magnetar.broker.compaction.entries import compact_entry, encode_compacted, is_batch, retained_words
from magnetar.broker.compaction.state import (
    NONE,
    PENDING_PROPERTY,
    READ_RUN_ENTRIES_MAX,
    RUNNING_PROPERTY,
    CompactedView,
    switch_properties,
)
from magnetar.broker.compaction.view import CompactedTopic
from magnetar.core.clock import Clock
from magnetar.ledger.api import Cursor, ManagedLedgerError, Position
from magnetar.storage.api import StorageError

log = logging.getLogger("magnetar.broker.compaction")

APPENDS_IN_FLIGHT_MAX = 256  # pass 2 appends pipelined into the compacted ledger


class CompactionError(Exception):
    """A compaction failed; the previous view stays."""


@dataclass(frozen=True, slots=True)
class CompactionResult:
    view: CompactedView
    messages_read: int
    messages_kept: int
    duration_ms: int

    @property
    def removed(self) -> int:
        return max(self.messages_read - self.messages_kept, 0)


def compacted_ledger_metadata(topic: str) -> dict[str, str]:
    return {"application": "magnetar", "component": "compacted-ledger", "pulsar/managed-ledger": topic}


async def compact(topic: CompactedTopic, clock: Clock) -> CompactionResult:
    """Compact ``topic`` up to its last readable entry and switch readers to the new view."""
    started_ms = clock.monotonic_ms()
    cursor = await topic.cursor()
    await cursor.set_properties({RUNNING_PROPERTY: 1})
    old = topic.view
    horizon = topic.txn.max_read_position(topic.ledger.last_confirmed)
    try:
        latest, read = await _pass_one(topic, horizon)
        keep: dict[Source, set[int]] = {}
        for source, batch_index in latest.values():
            keep.setdefault(source, set()).add(batch_index)
        new = await _pass_two(topic, cursor, old, horizon, keep)
    except Exception:
        await cursor.set_properties({RUNNING_PROPERTY: 0})  # failed, not interrupted: no automatic re-run
        raise
    await _switch(topic, cursor, old, new)
    duration_ms = int(clock.monotonic_ms() - started_ms)
    log.info("%s: compacted %d messages to %d keys in %d entries up to %s (%d ms)", topic.name, read, len(latest),
             new.entries, horizon, duration_ms)
    return CompactionResult(new, read, len(latest), duration_ms)


#: where pass 2 finds an entry holding a latest message: its position, and its index in the old compacted
#: ledger (-1: read it from the topic)
Source = tuple[Position, int]


async def _pass_one(topic: CompactedTopic, horizon: Position) -> tuple[dict[str, tuple[Source, int]], int]:
    latest: dict[str, tuple[Source, int]] = {}
    read = 0
    log.info("%s: compaction pass 1 up to %s", topic.name, horizon)
    async for entry in topic.stream(horizon):
        _, messages = await topic.visible(entry, bodies=False)
        read += len(messages)
        for m in messages:
            if m.key is None:
                continue
            if m.null_value:
                latest.pop(m.key, None)
            else:
                latest[m.key] = ((entry.position, entry.index), m.batch_index)
    return latest, read


async def _pass_two(
    topic: CompactedTopic, cursor: Cursor, old: CompactedView | None, horizon: Position, keep: dict[Source, set[int]]
) -> CompactedView:
    """Reads only the entries that hold a latest message, in position order (runs of the old compacted
    ledger in one read each), and appends their compacted form with many appends in flight."""
    info = await topic.store.create_ledger(compacted_ledger_metadata(topic.ledger.name))
    ledger_id = info.ledger_id
    await cursor.set_properties({PENDING_PROPERTY: ledger_id})
    log.info("%s: compaction pass 2 writes %d entries to ledger %d", topic.name, len(keep), ledger_id)
    written = 0
    pending: list[bytes] = []
    try:
        async for position, data, indexes in _needed(topic, old, keep):
            meta = proto.parse_entry_metadata(data)
            compacted = compact_entry(data, meta, indexes, topic.max_message_size)
            words = retained_words(indexes, max(meta.num_messages_in_batch, 1)) if is_batch(meta) else []
            pending.append(encode_compacted(position, words, compacted))
            if len(pending) >= APPENDS_IN_FLIGHT_MAX:
                written = await _append_all(topic, ledger_id, pending, written)
                pending = []
        written = await _append_all(topic, ledger_id, pending, written)
        await topic.store.seal(ledger_id)
    except (StorageError, ManagedLedgerError, proto.ProtocolError, CompactionError) as exc:
        await _abandon(topic, cursor, ledger_id)
        raise CompactionError(f"pass 2 failed: {exc}") from exc
    return CompactedView(ledger_id, written, horizon)


async def _needed(
    topic: CompactedTopic, old: CompactedView | None, keep: dict[Source, set[int]]
) -> AsyncIterator[tuple[Position, bytes, set[int]]]:
    sources = sorted(keep)
    i = 0
    while i < len(sources):  # each pass consumes at least one source
        position, index = sources[i]
        if index < 0 or old is None:
            yield position, (await topic.ledger.read_entry(position)).data, keep[sources[i]]
            i += 1
            continue
        run = 1  # a run of consecutive compacted-ledger indexes: one read
        while (i + run < len(sources) and run < READ_RUN_ENTRIES_MAX
               and sources[i + run][1] == index + run):
            run += 1
        for entry in await topic.read(old, index, index + run - 1):
            yield entry.position, entry.data, keep[(entry.position, entry.index)]
        i += run


async def _append_all(topic: CompactedTopic, ledger_id: int, datas: list[bytes], written: int) -> int:
    """Append in order with many appends in flight; the ids must follow on from ``written``."""
    if not datas:
        return written
    ids = await asyncio.gather(*(topic.store.append(ledger_id, d) for d in datas))
    if list(ids) != list(range(written, written + len(datas))):
        raise CompactionError(f"compacted ledger {ledger_id}: appends landed out of order")
    return written + len(datas)


async def _abandon(topic: CompactedTopic, cursor: Cursor, ledger_id: int) -> None:
    """A failed pass 2: its ledger goes, and nothing refers to it any more."""
    try:
        await cursor.set_properties({PENDING_PROPERTY: NONE})
        await topic.delete_ledger(ledger_id)
    except Exception:  # best effort: a restart's recovery deletes it otherwise
        log.exception("%s: cleaning up compacted ledger %d failed", topic.name, ledger_id)


async def _switch(topic: CompactedTopic, cursor: Cursor, old: CompactedView | None, new: CompactedView) -> None:
    retired = old.ledger_id if old is not None else NONE
    await cursor.set_properties(switch_properties(new, retired))  # the switch: one cursor record
    topic.view = new
    log.info("%s: switched to compacted ledger %d (horizon %s)", topic.name, new.ledger_id, new.horizon)
    if new.horizon > cursor.mark_delete_position:
        cursor.acknowledge_cumulative(new.horizon)  # only now may retention trim what the view covers
        await cursor.flush()
    if old is not None:
        for ledger_id in topic.retire(old.ledger_id):
            await topic.delete_ledger(ledger_id)
