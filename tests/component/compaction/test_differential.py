"""Compaction against a dict model: random keyed puts (single and batched), deletes (null values), empty values
and keyless messages, with compactions in between, over the real managed ledger on in-memory stores.

After every compaction: the compacted ledger alone folds to the model at the horizon, the latest values
(view + live tail) equal the model now, a read_compacted cursor from the start yields the same, and the
compacted entries are in position order."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar import protocol as proto
from magnetar.broker.compaction import CompactedTopic
from magnetar.broker.compaction.compactor import compact
from magnetar.broker.compaction.entries import messages_of
from magnetar.broker.compaction.state import NO_MESSAGE
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedgerConfig
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore

MAX_SIZE = 5 * 1024 * 1024
KEYS = st.sampled_from(["a", "b", "c", "d", "e", None])  # None: a keyless message
VALUES = st.one_of(st.none(), st.binary(max_size=6))  # None: a tombstone; b"" is a value
MESSAGE = st.tuples(KEYS, VALUES)
OP = st.one_of(
    st.tuples(st.just("send"), st.lists(MESSAGE, min_size=1, max_size=5), st.booleans()),  # batched?
    st.tuples(st.just("compact")),
    st.tuples(st.just("check")),  # the view up to the horizon, then the live tail
    st.tuples(st.just("restart")),  # reopen the managed ledger: the view comes back from the cursor
)

Model = dict[str, bytes]


def _single(key: str | None, value: bytes | None, seq: int) -> proto.pb.SingleMessageMetadata:
    single = proto.pb.SingleMessageMetadata(payload_size=0, sequence_id=seq)
    if key is not None:
        single.partition_key = key
    if value is None:
        single.null_value = True
    return single


def _entries(messages: Sequence[tuple[str | None, bytes | None]], batched: bool, seq: int) -> list[bytes]:
    if not batched:
        out = []
        for i, (key, value) in enumerate(messages):
            meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=seq + i, publish_time=1)
            if key is not None:
                meta.partition_key = key
            if value is None:
                meta.null_value = True
            out.append(proto.make_entry(meta, value or b""))
        return out
    payload = proto.build_batch([(_single(k, v, seq + i), v or b"") for i, (k, v) in enumerate(messages)])
    meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1,
                                    num_messages_in_batch=len(messages))
    return [proto.make_entry(meta, payload)]


def _apply(model: Model, messages: Sequence[tuple[str | None, bytes | None]]) -> None:
    for key, value in messages:
        if key is None:
            continue
        model.pop(key, None)
        if value is not None:
            model[key] = value


def _fold(model: Model, data: bytes, words: list[int] | None) -> None:
    meta = proto.parse_entry_metadata(data)
    for m in messages_of(data, meta, MAX_SIZE):
        if words and m.batch_index >= 0 and not (words[m.batch_index // 64] >> (m.batch_index % 64)) & 1:
            continue  # the ack set hides it from the client
        _apply(model, [(m.key, None if m.null_value else m.body)])


async def _check(topic: CompactedTopic, now: Model, at_horizon: Model) -> None:
    view = topic.view
    assert view is not None
    entries = await topic.read(view, 0, view.entries - 1) if view.entries else []
    assert [e.position for e in entries] == sorted({e.position for e in entries})
    held = [m for e in entries for m in messages_of(e.data, proto.parse_entry_metadata(e.data), MAX_SIZE)]
    assert all(m.key is not None and not m.null_value for m in held)  # no keyless message, no tombstone
    assert len({m.key for m in held}) == len(held)  # each key once: its latest value
    assert {m.key: m.body for m in held} == at_horizon
    latest = await topic.latest_values()
    assert {k: v.value for k, v in latest.items()} == now
    assert list(latest) == list(now)  # ordered by each key's last write
    inner = topic.ledger.new_non_durable_cursor(topic.ledger.next_valid_position(topic.ledger.first_position()), "r")
    cursor = topic.reading_cursor(inner, NO_MESSAGE, from_start=False)
    read: Model = {}
    for _ in range(1000):  # bounded: every read returns entries or ends the loop
        batch = await cursor.read_entries(7)
        if not batch:
            break
        for e in batch:
            _fold(read, e.data, cursor.batch_ack_set(e.position))
    assert read == now


async def _run(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    store, metadata = MemoryLedgerStore(), MemoryMetadataStore()
    config = ManagedLedgerConfig(max_entries_per_ledger=4)
    factory = LedgerFactory(store, metadata, config=config)
    ledger = await factory.open("public/default/persistent/diff")
    topic = CompactedTopic("diff", ledger, store, max_message_size=MAX_SIZE)
    model: Model = {}
    at_horizon: Model = {}
    seq = 0
    for op in ops:
        if op[0] == "send":
            for data in _entries(op[1], op[2], seq):
                await ledger.add_entry(data)
            seq += len(op[1])
            _apply(model, op[1])
        elif op[0] == "compact":
            await compact(topic, ManualClock())
            at_horizon = dict(model)
            await _check(topic, model, at_horizon)
        elif op[0] == "check" and topic.view is not None:
            await _check(topic, model, at_horizon)
        elif op[0] == "restart":
            await factory.close()
            factory = LedgerFactory(store, metadata, config=config)
            ledger = await factory.open("public/default/persistent/diff")
            topic = CompactedTopic("diff", ledger, store, max_message_size=MAX_SIZE)
            await topic.recover()
            assert not topic.needs_rerun
    await compact(topic, ManualClock())
    await _check(topic, model, dict(model))
    await factory.close()


@settings(max_examples=80, deadline=None)
@given(st.lists(OP, max_size=25))
def test_compaction_matches_a_dict_model(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    asyncio.run(_run(ops))
