"""The SQLite store and the in-memory store, driven by the same random steps, must agree exactly:
same records, same children, same exceptions, same watch events, across reopening the SQLite file; and the
same coordination: ephemeral and sequential keys, their owners, a session's end."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from magnetar.core.clock import ManualClock
from magnetar.metadata import MemoryMetadataStore, MetadataError, SqliteMetadataStore, WatchEvent

_SEGMENTS = st.sampled_from(["a", "b"])
_PATHS = st.lists(_SEGMENTS, min_size=1, max_size=3).filter(lambda p: len(p) < 3 or p[0] == "a")
_VALID_KEYS = _PATHS.map(lambda parts: "/" + "/".join(parts))
_INVALID_KEYS = st.sampled_from(["", "a", "/a/", "//a", "/a//b", "/"])
KEYS = st.one_of(_VALID_KEYS, _VALID_KEYS, _INVALID_KEYS)
READ_KEYS = st.one_of(_VALID_KEYS, st.just("/"), _INVALID_KEYS)
EXPECTED = st.one_of(st.none(), st.integers(min_value=-1, max_value=3))
VALUES = st.binary(max_size=8)


def _outcome(loop: asyncio.AbstractEventLoop, call: Awaitable[Any]) -> tuple[str, Any]:
    try:
        return ("ok", loop.run_until_complete(call))
    except MetadataError as exc:
        return ("error", type(exc))


class MetadataAgreement(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.directory = Path(tempfile.mkdtemp(prefix="magnetar-meta-"))
        self.path = self.directory / "metadata.db"
        self.memory = MemoryMetadataStore(clock=self.clock)
        self.sqlite = SqliteMetadataStore(self.path, clock=self.clock)
        self.memory_events: list[WatchEvent] = []
        self.sqlite_events: list[WatchEvent] = []
        self.memory.watch("/", self.memory_events.append)
        self.sqlite.watch("/", self.sqlite_events.append)

    def both(self, name: str, *args: Any) -> Any:
        expected = _outcome(self.loop, getattr(self.memory, name)(*args))
        actual = _outcome(self.loop, getattr(self.sqlite, name)(*args))
        assert actual == expected, (name, args)
        return expected

    @rule(key=KEYS, value=VALUES, expected_version=EXPECTED)
    def put(self, key: str, value: bytes, expected_version: int | None) -> None:
        self.both("put", key, value, expected_version)

    @rule(key=KEYS, expected_version=EXPECTED)
    def delete(self, key: str, expected_version: int | None) -> None:
        self.both("delete", key, expected_version)

    @rule(key=KEYS, value=VALUES, ephemeral=st.booleans(), sequential=st.booleans())
    def create(self, key: str, value: bytes, ephemeral: bool, sequential: bool) -> None:
        expected = _outcome(self.loop, self.memory.create(key, value, ephemeral=ephemeral, sequential=sequential))
        actual = _outcome(self.loop, self.sqlite.create(key, value, ephemeral=ephemeral, sequential=sequential))
        assert actual == expected, ("create", key, ephemeral, sequential)

    @rule(key=READ_KEYS)
    def get_owned(self, key: str) -> None:
        self.both("get_owned", key)

    @rule()
    def expire_session(self) -> None:
        self.both("expire_session")

    @rule(key=READ_KEYS)
    def get(self, key: str) -> None:
        self.both("get", key)

    @rule(key=READ_KEYS)
    def exists(self, key: str) -> None:
        self.both("exists", key)

    @rule(key=READ_KEYS)
    def children(self, key: str) -> None:
        self.both("children", key)

    @rule(ms=st.integers(min_value=0, max_value=1000))
    def advance_clock(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def reopen_sqlite(self) -> None:
        """A clean restart: the closed session's ephemeral keys go in both."""
        self.loop.run_until_complete(self.sqlite.close())
        self.sqlite = SqliteMetadataStore(self.path, clock=self.clock)
        self.sqlite.watch("/", self.sqlite_events.append)
        old, self.memory = self.memory, self.memory.another_session()
        self.memory.watch("/", self.memory_events.append)
        self.loop.run_until_complete(old.close())

    @invariant()
    def same_watch_events(self) -> None:
        assert self.sqlite_events == self.memory_events

    def teardown(self) -> None:
        self.loop.run_until_complete(self.sqlite.close())
        self.loop.run_until_complete(self.memory.close())
        self.loop.close()
        shutil.rmtree(self.directory, ignore_errors=True)


MetadataAgreement.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestMetadataAgreement = MetadataAgreement.TestCase
