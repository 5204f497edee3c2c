"""Direct tests of the in-memory metadata store's contract."""

from __future__ import annotations

import pytest

from magnetar.core.clock import ManualClock
from magnetar.metadata import (
    NEW_KEY,
    BadVersion,
    EventKind,
    InvalidKey,
    MemoryMetadataStore,
    MetadataStoreClosed,
    NotFound,
    WatchEvent,
)


async def test_versions_start_at_zero_and_grow_per_put() -> None:
    clock = ManualClock()
    store = MemoryMetadataStore(clock=clock)
    first = await store.put("/a", b"1", NEW_KEY)
    clock.advance(5)
    second = await store.put("/a", b"2", 0)
    third = await store.put("/a", b"3")
    assert (first.version, second.version, third.version) == (0, 1, 2)
    assert second.created_ms == first.created_ms and second.modified_ms == first.created_ms + 5
    assert await store.get("/a") == third


async def test_compare_and_set_conflicts() -> None:
    store = MemoryMetadataStore()
    with pytest.raises(NotFound):
        await store.put("/a", b"", 0)
    await store.put("/a", b"")
    with pytest.raises(BadVersion):
        await store.put("/a", b"", NEW_KEY)
    with pytest.raises(BadVersion):
        await store.put("/a", b"", 3)
    with pytest.raises(BadVersion):
        await store.delete("/a", 1)
    await store.delete("/a", 0)
    with pytest.raises(NotFound):
        await store.delete("/a")


@pytest.mark.parametrize("key", ["", "a", "/a/", "//a", "/a//b", "/", "/a\x00"])
async def test_invalid_keys_cannot_be_put(key: str) -> None:
    with pytest.raises(InvalidKey):
        await MemoryMetadataStore().put(key, b"")


async def test_children_include_implicit_parents() -> None:
    store = MemoryMetadataStore()
    for key in ["/a/b/c", "/a/d", "/a", "/e"]:
        await store.put(key, b"")
    assert await store.children("/") == ["a", "e"]
    assert await store.children("/a") == ["b", "d"]
    assert await store.children("/a/b") == ["c"]
    assert await store.children("/zz") == []
    assert not await store.exists("/a/b")


async def test_watch_sees_writes_at_or_below_prefix_until_unwatched() -> None:
    store = MemoryMetadataStore()
    seen: list[WatchEvent] = []
    unwatch = store.watch("/a", seen.append)
    await store.put("/a", b"")
    await store.put("/a/b", b"")
    await store.put("/ab", b"")
    await store.put("/a", b"x")
    await store.delete("/a/b")
    unwatch()
    await store.put("/a/c", b"")
    assert seen == [
        WatchEvent("/a", EventKind.CREATED),
        WatchEvent("/a/b", EventKind.CREATED),
        WatchEvent("/a", EventKind.MODIFIED),
        WatchEvent("/a/b", EventKind.DELETED),
    ]


async def test_failing_watch_does_not_undo_the_write() -> None:
    store = MemoryMetadataStore()

    def explode(event: WatchEvent) -> None:
        raise RuntimeError("boom")

    store.watch("/", explode)
    await store.put("/a", b"v")
    assert await store.exists("/a")


async def test_closed_store_refuses_calls() -> None:
    store = MemoryMetadataStore()
    await store.close()
    with pytest.raises(MetadataStoreClosed):
        await store.get("/a")
