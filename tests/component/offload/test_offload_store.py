"""The offload store against both drivers: copy, verify, read across blocks, bounded cache, and each fault
(missing bucket, object deleted behind the store's back, corrupted block, endpoint down) as its own error."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from magnetar.storage.api import EntryNotFound
from magnetar.storage.offload import (
    BlockOffloadStore,
    OffloadAccessDenied,
    OffloadBucketMissing,
    OffloadCorrupted,
    OffloadNotFound,
    OffloadUnavailable,
    open_offload_store,
)
from magnetar.storage.offload.filesystem import FilesystemBlobStore
from magnetar.storage.offload.s3 import S3BlobStore
from tests.component.offload.conftest import fs_settings, s3_settings
from tests.s3_server import MotoServer, free_port


def make_entries(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(0, 900)) for _ in range(count)]


async def write(store: BlockOffloadStore, ledger_id: int, entries: list[bytes]):  # type: ignore[no-untyped-def]
    context = store.new_context(ledger_id)

    async def read(first: int, last: int) -> list[bytes]:
        return entries[first : last + 1]

    written = await store.write_ledger(context, len(entries), read, {"pulsar/managed-ledger": "t"})
    return context, written


async def test_copy_verify_and_read_back_across_blocks(offload_store: BlockOffloadStore) -> None:
    entries = make_entries(300)
    context, written = await write(offload_store, 12, entries)
    assert written.entries == 300 and written.size_bytes == sum(map(len, entries))
    assert written.blocks > 10, "4 KiB blocks: many of them"
    verified = await offload_store.verify(context, 300)
    assert verified == written
    assert await offload_store.read(context, 0, 299) == entries
    for first, last in [(0, 0), (17, 95), (298, 299), (150, 150)]:
        assert await offload_store.read(context, first, last) == entries[first : last + 1]
    assert offload_store.cached_bytes <= 64 * 1024
    with pytest.raises(EntryNotFound):
        await offload_store.read(context, 299, 300)


async def test_an_entry_bigger_than_a_block_gets_its_own(offload_store: BlockOffloadStore) -> None:
    entries = [b"a" * 10, b"b" * 10_000, b"c" * 10]
    context, written = await write(offload_store, 3, entries)
    assert written.blocks == 3
    assert await offload_store.read(context, 0, 2) == entries


async def test_empty_and_retried_contexts_are_distinct(offload_store: BlockOffloadStore) -> None:
    first, second = offload_store.new_context(5), offload_store.new_context(5)
    assert first.uuid != second.uuid and first.data_key != second.data_key
    context, written = await write(offload_store, 5, [])
    assert written.entries == 0 and (await offload_store.verify(context, 0)).blocks == 0


async def test_deleted_behind_the_brokers_back_is_not_found(offload_store: BlockOffloadStore) -> None:
    context, _ = await write(offload_store, 8, make_entries(50))
    await offload_store.blobs.delete([context.data_key])
    with pytest.raises(OffloadNotFound):
        await offload_store.read(context, 0, 1)
    with pytest.raises(OffloadNotFound):
        await offload_store.verify(context, 50)


async def test_delete_by_context_removes_both_objects(offload_store: BlockOffloadStore) -> None:
    context, _ = await write(offload_store, 9, make_entries(40))
    other, _ = await write(offload_store, 10, make_entries(40))
    await offload_store.delete(context)
    await offload_store.delete(context)  # idempotent
    keys = await offload_store.blobs.list("")
    assert context.data_key not in keys and context.index_key not in keys
    assert other.data_key in keys and other.index_key in keys
    with pytest.raises(OffloadNotFound):
        await offload_store.read(context, 0, 0)


async def corrupt(store: BlockOffloadStore, key: str, at: int, moto: MotoServer | None) -> None:
    if isinstance(store.blobs, FilesystemBlobStore):
        path = Path(store.blobs.bucket) / key
        data = bytearray(path.read_bytes())
        data[at] ^= 0xFF
        path.write_bytes(bytes(data))
        return
    assert moto is not None
    data = bytearray(moto.get_object(store.blobs.bucket, key))
    data[at] ^= 0xFF
    moto.put_object(store.blobs.bucket, key, bytes(data))


async def test_a_corrupted_block_is_never_served(
    offload_store: BlockOffloadStore, request: pytest.FixtureRequest
) -> None:
    moto = request.getfixturevalue("moto") if isinstance(offload_store.blobs, S3BlobStore) else None
    entries = make_entries(100)
    context, _ = await write(offload_store, 21, entries)
    await corrupt(offload_store, context.data_key, 200, moto)  # inside the first block
    with pytest.raises(OffloadCorrupted) as caught:
        await offload_store.read(context, 0, 5)
    assert caught.value.ledger_id == 21 and caught.value.entry_id == 0
    with pytest.raises(OffloadCorrupted):
        await offload_store.verify(context, 100)
    assert await offload_store.read(context, 90, 99) == entries[90:]  # the other blocks still read


async def test_a_corrupted_index_is_an_error(offload_store: BlockOffloadStore, request: pytest.FixtureRequest) -> None:
    moto = request.getfixturevalue("moto") if isinstance(offload_store.blobs, S3BlobStore) else None
    context, _ = await write(offload_store, 22, make_entries(20))
    await corrupt(offload_store, context.index_key, 30, moto)
    with pytest.raises(OffloadCorrupted):
        await offload_store.read(context, 0, 0)


async def test_missing_directory(tmp_path: Path) -> None:
    store = open_offload_store(fs_settings(tmp_path / "absent"))
    assert store is not None
    with pytest.raises(OffloadBucketMissing):
        await store.blobs.check()
    with pytest.raises(OffloadBucketMissing):
        await store.write_ledger(store.new_context(1), 1, _never, {})


async def _never(first: int, last: int) -> list[bytes]:
    raise AssertionError("not reached")


async def test_missing_bucket(moto: MotoServer, aws_env: None) -> None:
    store = open_offload_store(s3_settings(moto, "no-such-bucket"))
    assert store is not None
    try:
        with pytest.raises(OffloadBucketMissing, match="no-such-bucket"):
            await store.blobs.check()
        with pytest.raises(OffloadBucketMissing, match="no-such-bucket"):
            await write(store, 1, make_entries(3))
    finally:
        await store.close()


async def test_wrong_credentials(aws_env: None) -> None:
    strict = MotoServer(check_credentials=True).start()
    store = open_offload_store(s3_settings(strict, "any"))
    assert store is not None
    try:
        with pytest.raises(OffloadAccessDenied, match="credentials"):
            await store.blobs.check()
        with pytest.raises(OffloadAccessDenied, match="InvalidAccessKeyId"):
            await write(store, 1, make_entries(3))
    finally:
        await store.close()
        strict.stop()


async def test_endpoint_down(aws_env: None) -> None:
    down = MotoServer(free_port())  # never started: nothing listens there
    store = open_offload_store(s3_settings(down, "bucket", request_timeout_s=1.0))
    assert store is not None
    try:
        with pytest.raises(OffloadUnavailable):
            await store.blobs.check()
        with pytest.raises(OffloadUnavailable):
            await write(store, 1, make_entries(3))
        with pytest.raises(OffloadUnavailable):
            await store.read(store.new_context(1), 0, 0)
    finally:
        await store.close()


async def test_multipart_upload_of_a_big_ledger(moto: MotoServer, aws_env: None) -> None:
    moto.create_bucket("big")
    store = open_offload_store(s3_settings(moto, "big", max_block_size_bytes=1024 * 1024,
                                           read_buffer_size_bytes=256 * 1024))
    assert store is not None
    try:
        entries = [bytes([i % 251]) * 100_000 for i in range(70)]  # 7 MB: two parts of at least 5 MiB
        context, written = await write(store, 4, entries)
        assert written.blocks == 7
        await store.verify(context, 70)
        assert await store.read(context, 60, 69) == entries[60:]
    finally:
        await store.close()


def test_service_answers_become_the_layers_errors() -> None:
    """What S3 answers for wrong credentials, a missing bucket or object and throttling (botocore's own
    error type, as the service's XML becomes it), and a missing credential chain."""
    from botocore.exceptions import ClientError, NoCredentialsError

    from magnetar.storage.offload import OffloadAccessDenied, OffloadError
    from magnetar.storage.offload.s3 import translate

    def answer(code: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": "m"}}, "GetObject")

    assert isinstance(translate(answer("InvalidAccessKeyId"), "x", bucket="b"), OffloadAccessDenied)
    assert isinstance(translate(answer("SignatureDoesNotMatch"), "x", bucket="b"), OffloadAccessDenied)
    assert isinstance(translate(answer("NoSuchBucket"), "x", bucket="b"), OffloadBucketMissing)
    assert isinstance(translate(answer("NoSuchKey"), "x", bucket="b"), OffloadNotFound)
    assert isinstance(translate(answer("SlowDown"), "x", bucket="b"), OffloadUnavailable)
    denied = translate(NoCredentialsError(), "x", bucket="b")
    assert isinstance(denied, OffloadAccessDenied) and "no AWS credentials" in str(denied)
    assert not OffloadAccessDenied.retryable and OffloadError.retryable
