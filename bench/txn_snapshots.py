"""Transaction-buffer recovery for a topic with many aborted transactions: PIP-178 multi-entry snapshot vs
the single-entry snapshot vs no snapshot (full replay), in one run.

    .venv/bin/python bench/txn_snapshots.py [--aborted 100000] [--segment-size 262144] [--tail 1000]

A managed ledger on the embedded store (fsync'd segment files, SQLite metadata) holds ``--aborted`` aborted
transactions (one message and one abort marker each) then ``--tail`` plain entries written after the
snapshot. For each scheme: the snapshot is written once (timed), then a fresh buffer recovers (timed): it
loads the snapshot and replays the topic after its maxReadPosition. Reported: snapshot write time, the
largest single record the scheme writes, recovery time, entries replayed, aborted ids recovered. Not a test.
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
from magnetar.broker.transactions.buffer import TransactionBuffer
from magnetar.broker.transactions.segmented_snapshot import KeyedTopic, SegmentedSnapshotStore
from magnetar.broker.transactions.snapshot import AbortedSnapshot, MetadataSnapshotStore, SnapshotInfo, encode_snapshot
from magnetar.broker.transactions.snapshot_topic import SystemKeyedTopic
from magnetar.core.clock import SystemClock
from magnetar.ledger.api import ManagedLedger, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.storage.embedded import EmbeddedLedgerStore

IN_FLIGHT = 256
MAX_SIZE = 5 * 1024 * 1024
TOPIC = "persistent://public/default/bench"
NEVER = 10**12


class NoSnapshots:
    """Full replay: nothing is kept."""

    def info(self, topic: str) -> SnapshotInfo | None:
        return None

    async def load(self, topic: str) -> AbortedSnapshot | None:
        return None

    async def save(self, topic: str, snapshot: AbortedSnapshot) -> None:
        return None

    async def delete(self, topic: str) -> None:
        return None


class Host:
    def __init__(self, ledger: ManagedLedger, store: EmbeddedLedgerStore) -> None:
        self.clock = SystemClock()
        self.ledger = ledger
        self.compacted: CompactedTopic | None = CompactedTopic("snap", ledger, store, max_message_size=MAX_SIZE)
        self.largest = 0

    async def append_internal(self, entry: bytes) -> Position:
        self.largest = max(self.largest, len(entry))
        return await self.ledger.add_entry(entry)


def _entries(aborted: int) -> list[bytes]:
    out = []
    for i in range(aborted):
        meta = proto.pb.MessageMetadata(producer_name="bench", sequence_id=i, publish_time=1,
                                        txnid_most_bits=1, txnid_least_bits=i)
        out.append(proto.make_entry(meta, b"x" * 100))
        out.append(proto.markers.make_txn_marker_entry(proto.markers.TXN_ABORT, (1, i), publish_time_ms=1))
    return out


def _plain(count: int) -> list[bytes]:
    return [proto.make_entry(proto.pb.MessageMetadata(producer_name="bench", sequence_id=i, publish_time=1),
                             b"p" * 100) for i in range(count)]


async def _append_all(ml: ManagedLedger, entries: list[bytes]) -> None:
    for start in range(0, len(entries), IN_FLIGHT):
        await asyncio.gather(*(ml.add_entry_future(e) for e in entries[start:start + IN_FLIGHT]))


def _buffer(ml: ManagedLedger, store: object) -> TransactionBuffer:
    return TransactionBuffer(TOPIC, ml, SystemClock(), ml.add_entry, store,  # type: ignore[arg-type]
                             snapshot_min_interval_ms=NEVER, snapshot_max_txn_count=NEVER)


async def _recover(ml: ManagedLedger, store: object) -> tuple[float, TransactionBuffer]:
    """Seconds from the start of recovery to the buffer being ready (the snapshot it takes then not counted)."""
    tb = _buffer(ml, store)
    await tb.recover()
    return (tb.recover_end_ms - tb.recover_start_ms) / 1000, tb


async def run(args: argparse.Namespace, data: Path) -> list[str]:
    store = await EmbeddedLedgerStore.open(data / "ledgers")
    metadata = SqliteMetadataStore(data / "metadata.db")
    factory = LedgerFactory(store, metadata)
    ml = await factory.open("public/default/persistent/bench")
    await _append_all(ml, _entries(args.aborted))
    host = Host(await factory.open("public/default/persistent/__transaction_buffer_snapshot"), store)

    async def keyed(topic: str, create: bool) -> KeyedTopic:
        return SystemKeyedTopic(host, lambda _: None, NEVER)

    segmented = SegmentedSnapshotStore(keyed, segment_size=args.segment_size)
    single = MetadataSnapshotStore(metadata)
    _, state = await _recover(ml, NoSnapshots())  # the index, rebuilt once by a full replay
    snapshot = state.snapshot()
    written = {}
    for name, target in (("multi-entry (PIP-178)", segmented), ("single-entry", single)):
        started = time.perf_counter()
        await target.save(TOPIC, snapshot)
        written[name] = time.perf_counter() - started
    await _append_all(ml, _plain(args.tail))
    sizes = {"multi-entry (PIP-178)": f"{host.largest:,} B", "single-entry": f"{len(encode_snapshot(snapshot)):,} B",
             "none (full replay)": "-"}
    rows = []
    for name, target in (("multi-entry (PIP-178)", SegmentedSnapshotStore(keyed, segment_size=args.segment_size)),
                         ("single-entry", MetadataSnapshotStore(metadata)), ("none (full replay)", NoSnapshots())):
        seconds, tb = await _recover(ml, target)
        write = f"{written[name]:.2f} s" if name in written else "-"
        rows.append(f"| {name:<22} | {write:>9} | {sizes[name]:>12} | {seconds:8.2f} s | {tb.recovered_entries:>9,} | "
                    f"{tb.aborted_count():>9,} |")
    await factory.close()
    await store.close()
    await metadata.close()
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aborted", type=int, default=100_000)
    parser.add_argument("--segment-size", type=int, default=262_144)
    parser.add_argument("--tail", type=int, default=1000)
    args = parser.parse_args()
    rows = ["| snapshot               |     write | largest record |  recovery | replayed |   aborted |",
            "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        rows.extend(await run(args, Path(tmp)))
    print(f"transaction-buffer recovery: {args.aborted:,} aborted transactions ({2 * args.aborted:,} entries), "
          f"{args.tail:,} entries after the snapshot, segments of {args.segment_size:,} bytes")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
