"""The embedded store, the object store (on an in-memory bucket here; on a real S3 API in
``tests/component/storage/test_agreement_s3.py``) and the in-memory store, driven by the same random steps,
must agree exactly: same ids, entries, infos, listings and exceptions, across closing and reopening the
embedded store. (The object store is not reopened: a new instance appends to no ledger it did not create.)"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from magnetar.core.clock import ManualClock
from magnetar.storage import EmbeddedLedgerStore, LedgerStore, MemoryLedgerStore, StorageError
from magnetar.storage.objectstore import ObjectClient, ObjectLedgerSettings, ObjectLedgerStore
from magnetar.storage.objectstore.memory import MemoryBucket, MemoryObjectClient

METADATA = st.dictionaries(st.sampled_from(["application", "component", "name"]), st.text(max_size=4))
PAYLOADS = st.binary(max_size=24)
ENTRY_IDS = st.integers(min_value=-1, max_value=6)


def _outcome(loop: asyncio.AbstractEventLoop, call: Awaitable[Any]) -> tuple[str, Any]:
    try:
        return ("ok", loop.run_until_complete(call))
    except StorageError as exc:
        return ("error", (type(exc), exc.ledger_id, exc.entry_id))


class LedgerAgreement(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.directory = Path(tempfile.mkdtemp(prefix="magnetar-ledgers-"))
        self.memory = MemoryLedgerStore(clock=self.clock)
        self.embedded = self._open_embedded()
        self.objects = self.loop.run_until_complete(
            ObjectLedgerStore.open(self.object_client(), prefix=f"agreement/{uuid.uuid4().hex}/",
                                   settings=ObjectLedgerSettings(flush_max_delay_ms=0), clock=self.clock)
        )
        self.ids_seen: list[int] = []

    def object_client(self) -> ObjectClient:
        """The bucket the object store runs on (a subclass puts it on a real S3 API)."""
        return MemoryObjectClient(MemoryBucket())

    @property
    def others(self) -> list[LedgerStore]:
        """The stores that must agree with the in-memory one."""
        return [self.embedded, self.objects]

    def _open_embedded(self) -> EmbeddedLedgerStore:
        # No fsync: the agreement is about semantics; durability has its own tests.
        return self.loop.run_until_complete(
            EmbeddedLedgerStore.open(self.directory, clock=self.clock, fsync=lambda fd: None)
        )

    def both(self, name: str, *args: Any) -> Any:
        expected = _outcome(self.loop, getattr(self.memory, name)(*args))
        for other in self.others:
            actual = _outcome(self.loop, getattr(other, name)(*args))
            assert actual == expected, (type(other).__name__, name, args, actual, expected)
        return expected

    def ledger_id(self, data: st.DataObject) -> int:
        # Mostly ledgers that exist or existed, sometimes one that never did.
        return data.draw(st.sampled_from([*self.ids_seen, 99]) if self.ids_seen else st.just(99))

    @rule(metadata=METADATA, ms=st.integers(min_value=0, max_value=50))
    def create(self, metadata: dict[str, str], ms: int) -> None:
        self.clock.advance(ms)
        kind, info = self.both("create_ledger", metadata)
        assert kind == "ok"
        self.ids_seen.append(info.ledger_id)

    @rule(data=st.data(), payload=PAYLOADS)
    def append(self, data: st.DataObject, payload: bytes) -> None:
        self.both("append", self.ledger_id(data), payload)

    @rule(data=st.data(), payloads=st.lists(PAYLOADS, min_size=2, max_size=5))
    def append_concurrently(self, data: st.DataObject, payloads: list[bytes]) -> None:
        ledger_id = self.ledger_id(data)

        async def gather(store: Any) -> list[Any]:
            calls = (store.append(ledger_id, p) for p in payloads)
            results = await asyncio.gather(*calls, return_exceptions=True)
            return [r if not isinstance(r, StorageError) else type(r) for r in results]

        expected = self.loop.run_until_complete(gather(self.memory))
        for other in self.others:
            assert self.loop.run_until_complete(gather(other)) == expected, type(other).__name__

    @rule(data=st.data(), first=ENTRY_IDS, last=ENTRY_IDS)
    def read(self, data: st.DataObject, first: int, last: int) -> None:
        self.both("read", self.ledger_id(data), first, last)

    @rule(data=st.data())
    def seal(self, data: st.DataObject) -> None:
        self.both("seal", self.ledger_id(data))

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        self.both("delete", self.ledger_id(data))

    @rule(data=st.data())
    def info(self, data: st.DataObject) -> None:
        self.both("info", self.ledger_id(data))

    @rule()
    def list_ledgers(self) -> None:
        self.both("list_ledgers")

    @precondition(lambda self: self.ids_seen)
    @rule()
    def reopen_embedded(self) -> None:
        self.loop.run_until_complete(self.embedded.close())
        self.embedded = self._open_embedded()

    @invariant()
    def same_ledgers(self) -> None:
        memory = self.loop.run_until_complete(self.memory.list_ledgers())
        for other in self.others:
            assert self.loop.run_until_complete(other.list_ledgers()) == memory, type(other).__name__

    def teardown(self) -> None:
        self.loop.run_until_complete(self.embedded.close())
        self.loop.run_until_complete(self.objects.close())
        self.loop.run_until_complete(self.memory.close())
        self.loop.close()
        shutil.rmtree(self.directory, ignore_errors=True)


LedgerAgreement.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestLedgerAgreement = LedgerAgreement.TestCase
