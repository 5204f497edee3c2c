"""Compaction speed: messages per second through both passes and the switch, for keyed messages.

    .venv/bin/python bench/compaction.py [--messages 1000000] [--keys 100000] [--value-bytes 100] [--batch 100]

One run, side by side: a managed ledger on the embedded store (fsync'd segment files, SQLite metadata) filled
with ``--messages`` keyed messages over ``--keys`` keys (every 10th key's last write a tombstone), once one
message per entry and once in batches of ``--batch``; then one compaction of the whole topic (pass 1, pass 2
into a new compacted ledger, the switch), timed by wall clock. Not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from magnetar import protocol as proto
from magnetar.broker.compaction import CompactedTopic
from magnetar.broker.compaction.compactor import compact
from magnetar.core.clock import SystemClock
from magnetar.ledger.factory import LedgerFactory
from magnetar.ledger.managed import ManagedLedgerImpl
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.storage.embedded import EmbeddedLedgerStore

IN_FLIGHT = 256
MAX_SIZE = 5 * 1024 * 1024


def _messages(args: argparse.Namespace) -> list[tuple[str, bytes | None]]:
    value = b"v" * args.value_bytes
    out: list[tuple[str, bytes | None]] = []
    for i in range(args.messages):
        key = i % args.keys
        last_round = i >= args.messages - args.keys
        out.append((f"key-{key}", None if last_round and key % 10 == 0 else value))
    return out


def _entries(messages: list[tuple[str, bytes | None]], batch: int) -> list[bytes]:
    entries = []
    for start in range(0, len(messages), batch):
        chunk = messages[start:start + batch]
        meta = proto.pb.MessageMetadata(producer_name="bench", sequence_id=start, publish_time=1)
        if batch == 1:
            key, value = chunk[0]
            meta.partition_key = key
            meta.null_value = value is None
            entries.append(proto.make_entry(meta, value or b""))
            continue
        singles = [(proto.pb.SingleMessageMetadata(payload_size=0, partition_key=k, null_value=v is None,
                                                   sequence_id=start + i), v or b"")
                   for i, (k, v) in enumerate(chunk)]
        meta.num_messages_in_batch = len(chunk)
        entries.append(proto.make_entry(meta, proto.build_batch(singles)))
    return entries


async def _fill(ml: ManagedLedgerImpl, entries: list[bytes]) -> None:
    for start in range(0, len(entries), IN_FLIGHT):
        await asyncio.gather(*(ml.add_entry_future(e) for e in entries[start:start + IN_FLIGHT]))


async def run(name: str, batch: int, messages: list[tuple[str, bytes | None]], data: Path) -> str:
    store = await EmbeddedLedgerStore.open(data / f"{name}-ledgers")
    metadata = SqliteMetadataStore(data / f"{name}-metadata.db")
    factory = LedgerFactory(store, metadata)
    ml = await factory.open("public/default/persistent/bench")
    entries = _entries(messages, batch)
    await _fill(ml, entries)
    topic = CompactedTopic(ml.name, ml, store, max_message_size=MAX_SIZE)
    started = time.perf_counter()
    result = await compact(topic, SystemClock())
    seconds = time.perf_counter() - started
    await factory.close()
    await store.close()
    await metadata.close()
    return (f"| {name:<22} | {len(entries):>9} | {result.messages_read:>9} | {result.messages_kept:>7} | "
            f"{result.view.entries:>9} | {seconds:7.2f} | {result.messages_read / seconds:>10,.0f} |")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    messages = _messages(args)
    rows = ["| layout                 |   entries |  messages |    keys | compacted | seconds | messages/s |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(await run("one message per entry", 1, messages, Path(tmp)))
        rows.append(await run(f"batches of {args.batch}", args.batch, messages, Path(tmp)))
    print(f"compaction of {args.messages:,} keyed messages over {args.keys:,} keys, {args.value_bytes}-byte values")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
