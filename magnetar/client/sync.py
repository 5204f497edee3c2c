"""A blocking facade over the asyncio client, for scripts and Spark executors.

One background thread runs an event loop per ``sync.Client``; every call submits a coroutine to
it and waits (bounded by the client's operation timeout plus a margin). Pickles as configuration,
like the asyncio ``Client``. Knows nothing of the protocol.

    from magnetar.client.sync import Client
    with Client("pulsar://localhost:6650") as client:
        producer = client.create_producer("t")
        producer.send(b"x")
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from magnetar.client._client import DEFAULT_TXN_TIMEOUT_MS, StartAt
from magnetar.client._client import Client as AsyncClient
from magnetar.client._consumer import Consumer as AsyncConsumer
from magnetar.client._messages import Message, MessageId
from magnetar.client._partitioned import MultiTopicConsumer, PartitionedProducer
from magnetar.client._producer import Producer as AsyncProducer
from magnetar.client._transaction import Transaction as AsyncTransaction
from magnetar.client._transaction import TransactionState

__all__ = ["Client", "Consumer", "Producer", "Transaction"]

R = TypeVar("R")
_MARGIN_S = 5.0


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="magnetar-client", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, R], timeout_s: float | None) -> R:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def submit(self, coro: Coroutine[Any, Any, R]) -> concurrent.futures.Future[R]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()


class Transaction:
    """``with client.transaction() as txn:`` commits on a clean exit, aborts on an exception."""

    def __init__(self, loop: _Loop, inner: AsyncTransaction, timeout_s: float) -> None:
        self._loop, self.inner, self._timeout_s = loop, inner, timeout_s

    @property
    def txn_id(self) -> tuple[int, int]:
        return self.inner.txn_id

    @property
    def state(self) -> TransactionState:
        return self.inner.state

    def commit(self) -> None:
        self._loop.run(self.inner.commit(), self._timeout_s)

    def abort(self) -> None:
        self._loop.run(self.inner.abort(), self._timeout_s)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self._loop.run(self.inner.__aexit__(exc_type), self._timeout_s)


def _inner_txn(options: dict[str, Any]) -> dict[str, Any]:
    txn = options.get("txn")
    if isinstance(txn, Transaction):
        options = {**options, "txn": txn.inner}
    return options


class Producer:
    def __init__(self, loop: _Loop, inner: AsyncProducer | PartitionedProducer, timeout_s: float) -> None:
        self._loop, self._inner, self._timeout_s = loop, inner, timeout_s

    @property
    def topic(self) -> str:
        return self._inner.topic

    def send(self, data: bytes, **options: Any) -> MessageId:
        """Options as the asyncio producer's ``send``, ``txn`` included."""
        return self._loop.run(self._inner.send(data, **_inner_txn(options)), self._timeout_s)

    def send_async(self, data: bytes, **options: Any) -> concurrent.futures.Future[MessageId]:
        async def go() -> MessageId:
            return await self._inner.send_nowait(data, **options)

        return self._loop.submit(go())

    def flush(self) -> None:
        self._loop.run(self._inner.flush(), self._timeout_s)

    def close(self) -> None:
        self._loop.run(self._inner.close(), self._timeout_s)


class Consumer:
    def __init__(self, loop: _Loop, inner: AsyncConsumer | MultiTopicConsumer, timeout_s: float) -> None:
        self._loop, self._inner, self._timeout_s = loop, inner, timeout_s

    def receive(self, timeout_ms: float | None = None) -> Message:
        wait_s = None if timeout_ms is None else timeout_ms / 1000 + _MARGIN_S
        return self._loop.run(self._inner.receive(timeout_ms), wait_s)

    def acknowledge(self, message: Message | MessageId, *, txn: Transaction | None = None) -> None:
        inner = None if txn is None else txn.inner
        self._loop.run(self._inner.acknowledge(message, txn=inner), self._timeout_s)

    def acknowledge_cumulative(self, message: Message | MessageId, *, txn: Transaction | None = None,
                               receipt: bool = False) -> None:
        inner = None if txn is None else txn.inner
        self._loop.run(self._inner.acknowledge_cumulative(message, txn=inner, receipt=receipt), self._timeout_s)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        async def go() -> None:
            self._inner.negative_acknowledge(message)

        self._loop.run(go(), self._timeout_s)

    def seek(self, target: MessageId | int) -> None:
        self._loop.run(self._inner.seek(target), self._timeout_s)

    def close(self) -> None:
        self._loop.run(self._inner.close(), self._timeout_s)


class Client:
    def __init__(self, service_url: str, **options: Any) -> None:
        self._service_url = service_url
        self._options = options
        self._async = AsyncClient(service_url, **options)
        self._timeout_s = self._async.config.operation_timeout_ms / 1000 * 2 + _MARGIN_S
        self._loop: _Loop | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"service_url": self._service_url, "options": self._options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["service_url"], **state["options"])  # type: ignore[misc]

    def _ensure_loop(self) -> _Loop:
        if self._loop is None:
            self._loop = _Loop()
        return self._loop

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def create_producer(self, topic: str, **options: Any) -> Producer:
        loop = self._ensure_loop()
        return Producer(loop, loop.run(self._async.create_producer(topic, **options), self._timeout_s), self._timeout_s)

    def subscribe(self, topic: str | list[str], subscription: str, **options: Any) -> Consumer:
        loop = self._ensure_loop()
        inner = loop.run(self._async.subscribe(topic, subscription, **options), self._timeout_s)
        return Consumer(loop, inner, self._timeout_s)

    def new_transaction(self, timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS) -> Transaction:
        loop = self._ensure_loop()
        return Transaction(loop, loop.run(self._async.new_transaction(timeout_ms), self._timeout_s), self._timeout_s)

    def transaction(self, timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS) -> Transaction:
        """A new transaction to use as ``with client.transaction() as txn:``."""
        return self.new_transaction(timeout_ms)

    def read(self, topic: str, *, start: StartAt = "earliest", end: StartAt | None = "latest",
             timeout_ms: float | None = None) -> Iterator[Message]:
        """Messages from ``start`` to ``end``, fetched on the client's loop one at a time."""
        loop = self._ensure_loop()
        agen = self._async.read(topic, start=start, end=end, timeout_ms=timeout_ms)
        try:
            while True:  # ends with the async iterator
                try:
                    yield loop.run(agen.__anext__(), None if timeout_ms is None else self._timeout_s + timeout_ms)
                except StopAsyncIteration:
                    return
        finally:
            loop.run(agen.aclose(), self._timeout_s)

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            self._loop.run(self._async.close(), self._timeout_s)
        finally:
            self._loop.stop()
            self._loop = None
