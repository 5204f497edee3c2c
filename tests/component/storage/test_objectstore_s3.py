"""The object ledger store against a real S3 API (a moto server process), directly and through a proxy that
injects faults: append/read/seal/delete, racing writers, 5xx answers, lost answers, the endpoint down, and a
service that ignores conditional writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from magnetar.storage import LedgerFenced, StorageIOError
from magnetar.storage.objectstore import ObjectLedgerSettings, ObjectLedgerStore, ObjectStoreRefused
from tests.component.storage.conftest import BUCKET, fresh_prefix, s3_client
from tests.s3_proxy import S3FaultProxy
from tests.s3_server import MotoServer, TcpGate

WAIT_S = 30.0
FAST = ObjectLedgerSettings(flush_max_delay_ms=0, attempts_max=3, backoff_ms=10, backoff_ms_max=50)


@pytest.fixture
def proxy(moto: MotoServer, bucket: str) -> Iterator[S3FaultProxy]:
    server = S3FaultProxy(moto.port).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    yield fresh_prefix()


async def open_store(endpoint: str, prefix: str, settings: ObjectLedgerSettings = FAST,
                     request_timeout_ms: int = 2000) -> ObjectLedgerStore:
    return await ObjectLedgerStore.open(s3_client(endpoint, request_timeout_ms=request_timeout_ms), prefix=prefix,
                                        settings=settings)


def chunk_keys(moto: MotoServer, prefix: str, ledger_id: int) -> list[str]:
    listed = moto.client().list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}ledgers/{ledger_id:020d}/")
    return [str(o["Key"]) for o in listed.get("Contents", [])]


async def test_append_read_seal_delete_on_s3(moto: MotoServer, bucket: str, prefix: str) -> None:
    store = await open_store(moto.endpoint, prefix)
    other = await open_store(moto.endpoint, prefix)
    try:
        info = await store.create_ledger({"component": "managed-ledger"})
        ids = await asyncio.gather(*(store.append(info.ledger_id, b"m%03d" % i) for i in range(100)))
        assert ids == list(range(100))
        more = [await store.append(info.ledger_id, b"tail%d" % i) for i in range(3)]
        assert more == [100, 101, 102]
        assert len(chunk_keys(moto, prefix, info.ledger_id)) == 4  # one PUT for the hundred, one per tail
        seen = await other.info(info.ledger_id)
        assert (seen.entries, seen.sealed, seen.custom_metadata) == (103, False, {"component": "managed-ledger"})
        assert await other.read(info.ledger_id, 98, 101) == [b"m098", b"m099", b"tail0", b"tail1"]
        sealed = await store.seal(info.ledger_id)
        assert (sealed.entries, sealed.sealed) == (103, True)
        assert (await other.info(info.ledger_id)).sealed
        await other.delete(info.ledger_id)
        assert info.ledger_id not in await store.list_ledgers()
        assert len(chunk_keys(moto, prefix, info.ledger_id)) == 1  # the seal, kept as a tombstone
    finally:
        await store.close()
        await other.close()


async def test_conditional_creates_have_one_winner_per_key_on_s3(moto: MotoServer, bucket: str, prefix: str) -> None:
    a, b = s3_client(moto.endpoint), s3_client(moto.endpoint)
    try:
        for i in range(40):
            key = f"{prefix}race/{i}"
            results = await asyncio.gather(a.put_if_absent(key, b"a"), b.put_if_absent(key, b"b"),
                                           return_exceptions=True)
            assert sorted(type(r).__name__ for r in results) == ["NoneType", "ObjectExists"], results
            winner = b"a" if results[0] is None else b"b"
            assert await a.get(key) == winner
    finally:
        await a.close()
        await b.close()


async def test_a_writer_racing_a_new_owner_loses_nothing_it_acknowledged(
    moto: MotoServer, bucket: str, prefix: str
) -> None:
    writer = await open_store(moto.endpoint, prefix)
    owner = await open_store(moto.endpoint, prefix)
    try:
        ledger_id = (await writer.create_ledger({})).ledger_id
        acked: list[int] = []
        started = asyncio.Event()

        async def write() -> None:
            for i in range(10_000):  # bounded: the owner's seal fences it within a few PUTs
                try:
                    acked.append(await writer.append(ledger_id, b"w%d" % i))
                except LedgerFenced:
                    return
                if i == 5:
                    started.set()
            raise AssertionError("never fenced")

        task = asyncio.ensure_future(write())
        await asyncio.wait_for(started.wait(), WAIT_S)
        sealed = await owner.seal(ledger_id)
        await asyncio.wait_for(task, WAIT_S)
        assert acked == list(range(len(acked))) and len(acked) >= 6
        assert sealed.entries >= len(acked)
        assert await owner.read(ledger_id, 0, sealed.entries - 1) == [b"w%d" % i for i in range(sealed.entries)]
        with pytest.raises(LedgerFenced):
            await writer.append(ledger_id, b"late")
    finally:
        await writer.close()
        await owner.close()


async def test_5xx_answers_are_retried_and_never_acknowledged(proxy: S3FaultProxy, moto: MotoServer,
                                                              prefix: str) -> None:
    store = await open_store(proxy.endpoint, prefix)
    try:
        ledger_id = (await store.create_ledger({})).ledger_id
        proxy.faults.add("error_503", "PUT", count=2)
        assert await asyncio.wait_for(store.append(ledger_id, b"after two 503s"), WAIT_S) == 0
        assert len(chunk_keys(moto, prefix, ledger_id)) == 1
        proxy.faults.add("error_503", "PUT", count=None)
        with pytest.raises(StorageIOError):
            await asyncio.wait_for(store.append(ledger_id, b"refused"), WAIT_S)
        assert len(chunk_keys(moto, prefix, ledger_id)) == 1  # no object: and no receipt
        proxy.faults.clear()
        with pytest.raises(StorageIOError):  # nothing lands after a failed append
            await store.append(ledger_id, b"after")
        assert (await store.seal(ledger_id)).entries == 1
    finally:
        await store.close()


async def test_a_lost_answer_is_recognised_as_ours(proxy: S3FaultProxy, moto: MotoServer, prefix: str) -> None:
    store = await open_store(proxy.endpoint, prefix)
    try:
        ledger_id = (await store.create_ledger({})).ledger_id
        proxy.faults.add("lose_answer", "PUT", count=1)
        assert await asyncio.wait_for(store.append(ledger_id, b"landed"), WAIT_S) == 0
        assert proxy.faults.injected == {"lose_answer": 1}
        assert len(chunk_keys(moto, prefix, ledger_id)) == 1
        assert await store.append(ledger_id, b"next") == 1
    finally:
        await store.close()


async def test_the_endpoint_down_fails_appends_without_receipts(moto: MotoServer, bucket: str, prefix: str) -> None:
    gate = TcpGate(moto.port).open()
    store = await open_store(gate.endpoint, prefix, request_timeout_ms=500)
    try:
        ledger_id = (await store.create_ledger({})).ledger_id
        assert await store.append(ledger_id, b"before") == 0
        gate.close()
        with pytest.raises(StorageIOError):
            await asyncio.wait_for(store.append(ledger_id, b"while down"), WAIT_S)
        gate.open()
        assert len(chunk_keys(moto, prefix, ledger_id)) == 1
        sealed = await store.seal(ledger_id)
        assert sealed.entries == 1
        fresh = (await store.create_ledger({})).ledger_id
        assert await store.append(fresh, b"after") == 0
    finally:
        gate.close()
        await store.close()


async def test_a_stalled_request_times_out_and_is_retried(proxy: S3FaultProxy, moto: MotoServer, prefix: str) -> None:
    store = await open_store(proxy.endpoint, prefix, request_timeout_ms=300)
    try:
        ledger_id = (await store.create_ledger({})).ledger_id
        proxy.faults.add("stall", "PUT", count=1)
        assert await asyncio.wait_for(store.append(ledger_id, b"slow"), WAIT_S) == 0
        assert store.requests.retries >= 1
    finally:
        proxy.faults.release()
        await store.close()


async def test_a_service_ignoring_conditional_writes_is_refused(proxy: S3FaultProxy, prefix: str) -> None:
    proxy.faults.add("strip_conditional", "PUT", count=None)
    client = s3_client(proxy.endpoint)
    with pytest.raises(ObjectStoreRefused, match="does not honour conditional writes"):
        await ObjectLedgerStore.open(client, prefix=prefix, settings=FAST)
    await client.close()


async def test_a_missing_bucket_is_named(moto: MotoServer, bucket: str, prefix: str) -> None:
    client = s3_client(moto.endpoint, bucket="no-such-bucket")
    with pytest.raises(ObjectStoreRefused, match="no-such-bucket"):
        await ObjectLedgerStore.open(client, prefix=prefix, settings=FAST)
    await client.close()

