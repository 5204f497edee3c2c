"""Tiered storage throughput: offload MB/s and read-back MB/s from the offload store vs local reads.

    .venv/bin/python bench/offload.py [--mb 64] [--entry-kb 16] [--ledger-mb 16] [--block-mb 1]

One run, side by side: a managed ledger on the embedded store (fsync'd segment files) filled with ``--mb``
of entries in ledgers of ``--ledger-mb``; then, for each driver (``aws-s3`` against ``moto[server]`` on
loopback, ``filesystem`` in a temporary directory):

* local read: every entry of the sealed ledgers from the local store;
* offload: copy + verification read-back of every sealed ledger (what ``topics offload`` does);
* read back cold: every entry from the offload store with an empty block cache (local copies released);
* read back warm: the same again through the block cache (sized to hold the data).

Wall-clock MB of entry payload per second; not a timed test. moto is an S3 API emulator in Python, so the
S3 figures measure this code and the HTTP path on loopback, not a real S3 service.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from magnetar.ledger.api import ManagedLedgerConfig
from magnetar.ledger.factory import LedgerFactory
from magnetar.ledger.managed import ManagedLedgerImpl
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.storage.embedded import EmbeddedLedgerStore
from magnetar.storage.offload import BlockOffloadStore, OffloadSettings, open_offload_store
from tests.s3_server import CREDENTIALS, MotoServer

MIB = 1024 * 1024
READ_BATCH = 256


async def read_sealed(ml: ManagedLedgerImpl) -> int:
    total = 0
    for summary in ml.ledgers()[:-1]:
        for first in range(0, summary.entries, READ_BATCH):
            last = min(summary.entries, first + READ_BATCH) - 1
            total += sum(map(len, await ml.read_range(summary.ledger_id, first, last)))
    return total


async def timed(what: Callable[[], Awaitable[int]]) -> tuple[int, float]:
    start = time.perf_counter()
    size = await what()
    return size, time.perf_counter() - start


async def fill(ml: ManagedLedgerImpl, total_bytes: int, entry_bytes: int) -> None:
    payload = os.urandom(entry_bytes)
    pending = []
    for i in range(total_bytes // entry_bytes + 1):  # one more: the last sealed ledger is full
        pending.append(ml.add_entry_future(payload[:-8] + i.to_bytes(8, "little")))
        if len(pending) >= 64:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)


async def run_driver(name: str, settings: OffloadSettings, data: Path, args: argparse.Namespace) -> list[str]:
    store = open_offload_store(settings)
    assert store is not None
    metadata = SqliteMetadataStore(data / f"{name}-metadata.db")
    local = await EmbeddedLedgerStore.open(data / f"{name}-ledgers")
    config = ManagedLedgerConfig(max_entries_per_ledger=args.ledger_mb * 1024 // args.entry_kb)
    factory = LedgerFactory(local, metadata, config=config, offload_store=store)
    ml = await factory.open("public/default/persistent/bench")
    await fill(ml, args.mb * MIB, args.entry_kb * 1024)
    rows = []

    def row(what: str, size: int, seconds: float) -> None:
        rows.append(f"| {name:<10} | {what:<28} | {size / MIB:8.1f} | {seconds:7.2f} | {size / MIB / seconds:8.1f} |")

    row("local read", *await timed(lambda: read_sealed(ml)))

    async def offload_all() -> int:
        for summary in ml.ledgers()[:-1]:
            await ml.offload_ledger(summary.ledger_id)
        return sum(x.size_bytes for x in ml.ledgers()[:-1])

    row("offload (copy + verify)", *await timed(offload_all))
    for summary in ml.ledgers()[:-1]:
        await ml.release_local(summary.ledger_id)
    ml.offload_store = BlockOffloadStore(store.blobs, settings)  # an empty cache
    row("read back, cold cache", *await timed(lambda: read_sealed(ml)))
    row("read back, warm cache", *await timed(lambda: read_sealed(ml)))
    await factory.close()
    await local.close()
    await metadata.close()
    await store.close()
    return rows


async def main_async(args: argparse.Namespace) -> None:
    os.environ.update(CREDENTIALS)
    base = OffloadSettings(max_block_size_bytes=args.block_mb * MIB, read_buffer_size_bytes=MIB,
                           read_cache_size_bytes=(args.mb + 16) * MIB)
    moto = MotoServer().start()
    try:
        moto.create_bucket("bench")
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            (data / "offload").mkdir()
            drivers = {
                "aws-s3": dataclasses.replace(base, driver="aws-s3", bucket="bench", region="us-east-1",
                                              service_endpoint=moto.endpoint),
                "filesystem": dataclasses.replace(base, driver="filesystem", filesystem_uri=str(data / "offload")),
            }
            print(f"{args.mb} MB in {args.entry_kb} KiB entries, {args.ledger_mb} MB ledgers, "
                  f"{args.block_mb} MiB blocks, 1 MiB ranged reads")
            print("| driver     | operation                    |       MB |       s |     MB/s |")
            print("|------------|------------------------------|----------|---------|----------|")
            for name, settings in drivers.items():
                for line in await run_driver(name, settings, data, args):
                    print(line, flush=True)
    finally:
        moto.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--entry-kb", type=int, default=16)
    parser.add_argument("--ledger-mb", type=int, default=16)
    parser.add_argument("--block-mb", type=int, default=1)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
