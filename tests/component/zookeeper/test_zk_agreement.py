"""The ZooKeeper store and the in-memory store, driven by the same random steps, must agree: same records
(key, value, version: ZooKeeper keeps its own timestamps), same children, same exceptions, and the same
watch events once ZooKeeper's (asynchronous) events have arrived. Rules that cut the store's link to the
server, and that write through another session while it is cut, hold the watch emulation to "every change
is told, across reconnections"."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from magnetar.core.clock import ManualClock
from magnetar.metadata import MemoryMetadataStore, MetadataError, Record, WatchEvent
from magnetar.metadata.zookeeper import ZooKeeperMetadataStore
from tests.unit.metadata.test_agreement import EXPECTED, KEYS, READ_KEYS, VALUES
from tests.zk_server import TcpProxy, ZooKeeperServer, unique_chroot

EVENTS_TIMEOUT_S = 20.0
SESSION_TIMEOUT_MS = 10_000  # long: a cut in these rules is short and must not expire the session


def _normal(value: Any) -> Any:
    if isinstance(value, Record):
        return (value.key, value.value, value.version)
    return value


def _outcome(loop: asyncio.AbstractEventLoop, call: Awaitable[Any]) -> tuple[str, Any]:
    try:
        return ("ok", _normal(loop.run_until_complete(call)))
    except MetadataError as exc:
        return ("error", type(exc))


class _Events:
    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self.arrived = asyncio.Event()

    def append(self, event: WatchEvent) -> None:
        self.events.append(event)
        self.arrived.set()

    async def wait_for(self, expected: list[WatchEvent], timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.events != expected:
            assert len(self.events) <= len(expected) and self.events == expected[: len(self.events)], (
                self.events, expected)
            remaining = deadline - loop.time()
            assert remaining > 0, ("watch events did not arrive", self.events, expected)
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), remaining)


class ZooKeeperAgreement(RuleBasedStateMachine):
    server: ZooKeeperServer  # set by the test below, one server for every example

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.chroot = unique_chroot("agree")
        self.proxy = TcpProxy(self.server.port).start()
        self.memory = MemoryMetadataStore(clock=self.clock)
        self.zk = self._store(self.proxy.hosts)
        self.other: ZooKeeperMetadataStore | None = None  # a second session, straight to the server
        self.memory_events: list[WatchEvent] = []
        self.zk_events = _Events()
        self.memory.watch("/", self.memory_events.append)
        self.zk.watch("/", self.zk_events.append)
        self.loop.run_until_complete(self.zk.watches_in_place())

    def _store(self, hosts: str) -> ZooKeeperMetadataStore:
        store = ZooKeeperMetadataStore(hosts, chroot=self.chroot, session_timeout_ms=SESSION_TIMEOUT_MS,
                                       operation_timeout_s=30.0)
        return self.loop.run_until_complete(store.start())

    def both(self, name: str, *args: Any, store: ZooKeeperMetadataStore | None = None) -> Any:
        expected = _outcome(self.loop, getattr(self.memory, name)(*args))
        actual = _outcome(self.loop, getattr(store or self.zk, name)(*args))
        assert actual == expected, (name, args)
        return expected

    @rule(key=KEYS, value=VALUES, expected_version=EXPECTED)
    def put(self, key: str, value: bytes, expected_version: int | None) -> None:
        self.both("put", key, value, expected_version)

    @rule(key=KEYS, value=VALUES)
    def create_ephemeral(self, key: str, value: bytes) -> None:
        """Ephemeral keys follow ZooKeeper's rules in both (no children below one, none made over one)."""
        expected = _outcome(self.loop, self.memory.create(key, value, ephemeral=True))
        actual = _outcome(self.loop, self.zk.create(key, value, ephemeral=True))
        assert actual == expected, ("create", key)

    @rule(key=KEYS, expected_version=EXPECTED)
    def delete(self, key: str, expected_version: int | None) -> None:
        self.both("delete", key, expected_version)

    @rule(key=READ_KEYS)
    def get(self, key: str) -> None:
        self.both("get", key)

    @rule(key=READ_KEYS)
    def exists(self, key: str) -> None:
        self.both("exists", key)

    @rule(key=READ_KEYS)
    def children(self, key: str) -> None:
        self.both("children", key)

    @rule()
    def drop_connection(self) -> None:
        """The link drops and comes back: the session survives, kazoo's watches do not."""
        self.proxy.cut()
        self.proxy.restore()

    @rule(key=KEYS, value=VALUES, delete=st.booleans())
    def write_while_cut(self, key: str, value: bytes, delete: bool) -> None:
        """Another session writes while this store is cut off: the change is told after it reconnects."""
        if self.other is None:
            self.other = self._store(self.server.hosts)
        self.proxy.cut()
        try:
            if delete:
                self.both("delete", key, None, store=self.other)
            else:
                self.both("put", key, value, None, store=self.other)
        finally:
            self.proxy.restore()

    @invariant()
    def same_watch_events(self) -> None:
        self.loop.run_until_complete(self.zk_events.wait_for(list(self.memory_events), EVENTS_TIMEOUT_S))

    def teardown(self) -> None:
        for store in (self.zk, self.other, self.memory):
            if store is not None:
                self.loop.run_until_complete(store.close())
        self.proxy.close()
        self.loop.close()


def test_zookeeper_agrees_with_memory(zk_server: ZooKeeperServer) -> None:
    ZooKeeperAgreement.server = zk_server
    run = ZooKeeperAgreement.TestCase()
    run.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
    run.runTest()
