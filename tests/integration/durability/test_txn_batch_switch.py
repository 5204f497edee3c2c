"""PIP-160's switch flipped as a user flips it, on the real process under load, then SIGKILLed.

Workers run consume-transform-produce transactions (``magnetar.client``: receive an input, send its output,
ack the input in the same transaction, commit) while the switches (``magnetar admin transactions
set-tc-batch-log`` / ``set-pending-ack-batch-log``, then their HTTP route) turn batching on, off and on
again. Commits are handed out by the test (a worker holds its transaction open until it gets one), so every
flip happens with transactions open. Each flip reaches the running coordinator log and the existing
subscription's pending-ack log at their next write: batches appear while it is on, and while it is off
every entry holds one record. The broker is SIGKILLed with transactions in flight: it comes back with the
switch as last set (stored dynamic configuration) and replays logs holding plain and batched entries; the
application aborts the transactions it had left open (as the Spark sink does after a failure), and in the
end every input became exactly one committed output, read back with the official client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from typing import Any

import pulsar
import pytest

from magnetar.client import Client
from magnetar.client.errors import PulsarClientError
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

IN, OUT = "persistent://public/default/switch-in", "persistent://public/default/switch-out"
INPUTS = 400
WORKERS = 12
TXN_TIMEOUT_MS = 300_000  # never reached: parked transactions stay open across flips on a loaded machine
STEP_TIMEOUT_S = 120.0
IDLE_RECEIVE_MS = 3_000  # nothing for this long once no transaction is open: the input is consumed
BASE = "/admin/v3/transactions/batchedLog"
FAMILIES = ("transactionLog", "pendingAckLog")


def status(broker: BrokerProcess) -> dict[str, Any]:
    code, body = call(broker.web_url, "GET", BASE)
    assert code == 200, body
    return dict(body)


def flushes(shown: dict[str, Any], family: str) -> int:
    return int(sum(shown[family]["flushTriggers"].values()))


async def flip(broker: BrokerProcess, enable: bool, *, cli: bool = False) -> None:
    """Both switches, with ``magnetar admin transactions ...`` or over HTTP (the route the verbs call)."""
    for verb, family in (("set-tc-batch-log", "transactionLog"), ("set-pending-ack-batch-log", "pendingAckLog")):
        if cli:
            cmd = [sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.web_url, "transactions",
                   verb, "--enable", "true" if enable else "false"]
            done = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            shown = json.loads(done.stdout)
        else:
            code, shown = await asyncio.to_thread(call, broker.web_url, "POST", f"{BASE}/{family}",
                                                  {"enabled": enable})
            assert code == 200, shown
        assert shown["enabled"] is enable


class Pipeline:
    """WORKERS transactions in flight; a worker commits when handed a commit (all at once when ``free``)."""

    def __init__(self, client: Client, *, free: bool) -> None:
        self.client = client
        self.free = free
        self.committed = 0
        self.open: set[tuple[int, int]] = set()  # transactions begun and not answered as committed
        self.failed: list[BaseException] = []
        self.changed = asyncio.Condition()
        self.allowed = asyncio.Semaphore(0)
        self.stop = False

    async def run(self, receive_timeout_ms: int) -> None:
        consumer = await self.client.subscribe(IN, "pipeline", subscription_type="Shared", initial_position="earliest")
        producer = await self.client.create_producer(OUT)
        await asyncio.gather(*(self._worker(consumer, producer, receive_timeout_ms) for _ in range(WORKERS)))

    async def _worker(self, consumer: Any, producer: Any, receive_timeout_ms: int) -> None:
        while not self.stop:  # ends when told, when the input stays empty, or when the broker is gone
            try:
                msg = await consumer.receive(timeout_ms=receive_timeout_ms)
            except PulsarClientError:
                return
            try:
                async with self.client.transaction(timeout_ms=TXN_TIMEOUT_MS) as txn:
                    self.open.add(txn.txn_id)
                    await producer.send(b"out-" + msg.data[3:], txn=txn)
                    await consumer.acknowledge(msg, txn=txn)
                    if not self.free:
                        await self.allowed.acquire()  # open until the test hands out a commit
                self.open.discard(txn.txn_id)
            except PulsarClientError as exc:
                if self.stop:
                    return
                async with self.changed:
                    self.failed.append(exc)
                    self.changed.notify_all()
                continue  # aborted (or its end unknown): the input comes back unless it committed
            async with self.changed:
                self.committed += 1
                self.changed.notify_all()

    async def commits(self, more: int) -> None:
        """Hand out ``more`` commits and wait until they were answered."""
        async with self.changed:
            target = self.committed + more
            for _ in range(more):
                self.allowed.release()
            await asyncio.wait_for(self.changed.wait_for(lambda: self.committed >= target or self.failed),
                                   STEP_TIMEOUT_S)
        assert not self.failed, f"a transaction failed before the kill: {self.failed[0]!r}"


async def before_the_kill(broker: BrokerProcess) -> set[tuple[int, int]]:
    async with Client(broker.url, operation_timeout_ms=10_000) as client:
        filler = await client.create_producer(IN, batching=True)
        await asyncio.gather(*(filler.send_nowait(b"in-%d" % i) for i in range(INPUTS)))
        await filler.flush()
        pipeline = Pipeline(client, free=False)
        running = asyncio.ensure_future(pipeline.run(receive_timeout_ms=60_000))
        await pipeline.commits(40)  # plain logs under load

        await flip(broker, True, cli=True)
        before = status(broker)
        await pipeline.commits(80)
        after = status(broker)
        for family in FAMILIES:  # the running logs batch now: the pending-ack log existed before the flip
            assert flushes(after, family) > flushes(before, family), family

        await flip(broker, False)
        before = status(broker)
        await pipeline.commits(60)
        after = status(broker)
        for family in FAMILIES:  # and back: one record per entry
            entries = after[family]["entriesWritten"] - before[family]["entriesWritten"]
            records = after[family]["recordsWritten"] - before[family]["recordsWritten"]
            assert entries == records > 0, family
            assert flushes(after, family) == flushes(before, family), family

        await flip(broker, True)
        await pipeline.commits(60)
        assert pipeline.failed == []
        for _ in range(WORKERS // 2):
            pipeline.allowed.release()  # some commits under way, the other transactions open
        broker.kill()  # SIGKILL with transactions in flight, their logs a mix of plain and batched entries
        pipeline.stop = True
        running.cancel()  # the workers would retry the dead broker until their operation timeout
        await asyncio.gather(running, return_exceptions=True)
        return pipeline.open


async def abort_leftovers(broker: BrokerProcess, txns: set[tuple[int, int]]) -> None:
    """What the application left open (or whose commit it never heard answered): abort; a committed one
    refuses, and keeps its outcome."""
    async with Client(broker.url, operation_timeout_ms=10_000) as client:
        for txn_id in sorted(txns):
            txn = await client.transaction_of(txn_id, TXN_TIMEOUT_MS)
            with contextlib.suppress(PulsarClientError):  # committed before the kill: nothing to abort
                await txn.abort()


async def after_the_restart(broker: BrokerProcess) -> None:
    async with Client(broker.url, operation_timeout_ms=10_000) as client:
        await Pipeline(client, free=True).run(receive_timeout_ms=IDLE_RECEIVE_MS)


def ended(broker: BrokerProcess, txns: set[tuple[int, int]]) -> bool:
    """The coordinator knows none of ``txns`` any more (each committed or aborted everywhere)."""
    base = "/admin/v3/transactions/transactionMetadata"
    return all(call(broker.web_url, "GET", f"{base}/{most}/{least}")[0] == 404 for most, least in txns)


def outputs(broker: BrokerProcess) -> list[bytes]:
    client = make_client(broker.url)
    try:
        reader = client.create_reader(OUT, pulsar.MessageId.earliest)
        out = []
        for _ in range(2 * INPUTS + 1):  # bounded: more than every output there can be
            if not reader.has_message_available():
                break
            out.append(reader.read_next(timeout_millis=15_000).data())
        return out
    finally:
        client.close()


async def test_switch_flips_live_logs_both_ways_and_survives_a_sigkill(fresh_broker: BrokerProcess) -> None:
    broker = fresh_broker
    left_open = await before_the_kill(broker)
    assert left_open  # the kill found transactions open or committing
    broker.start()
    shown = status(broker)
    assert shown["transactionLog"]["enabled"] is True and shown["pendingAckLog"]["enabled"] is True  # stored
    # what the kill left open came back from the log; aborted, its inputs are deliverable again
    await abort_leftovers(broker, left_open)
    assert broker.wait_until(lambda: ended(broker, left_open), STEP_TIMEOUT_S)
    await after_the_restart(broker)
    _, stats = call(broker.web_url, "GET", IN.replace("persistent://", "/admin/v2/persistent/") + "/stats")
    assert stats["subscriptions"]["pipeline"]["msgBacklog"] == 0
    got = outputs(broker)
    assert sorted(got) == sorted(b"out-%d" % i for i in range(INPUTS))  # each input exactly once
