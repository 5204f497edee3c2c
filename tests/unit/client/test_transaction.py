"""magnetar.client's Transaction against a recording coordinator: registration once, commit waits, failures abort."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from magnetar.client._transaction import Transaction, TransactionState
from magnetar.client.errors import InvalidTxnStatus, TransactionNotFound
from magnetar.protocol import pb


class FakeCoordinators:
    def __init__(self) -> None:
        self.sent: list[pb.BaseCommand] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail_end: Exception | None = None

    async def request(self, tc_id: int, build: Any) -> pb.BaseCommand:
        cmd = build(len(self.sent))
        self.sent.append(cmd)
        await self.gate.wait()
        if cmd.type == pb.BaseCommand.END_TXN and self.fail_end is not None:
            raise self.fail_end
        return cmd

    def types(self) -> list[str]:
        return [pb.BaseCommand.Type.Name(c.type) for c in self.sent]


def _txn(fake: FakeCoordinators) -> Transaction:
    return Transaction(fake, (0, 5), 10_000)  # type: ignore[arg-type]


async def test_partitions_and_subscriptions_register_once_even_concurrently() -> None:
    fake = FakeCoordinators()
    txn = _txn(fake)
    await asyncio.gather(*(txn.register_partition("t") for _ in range(3)))  # all in flight at once
    await txn.register_subscription("t", "s")
    await txn.register_subscription("t", "s")
    await txn.register_partition("u")
    assert fake.types() == ["ADD_PARTITION_TO_TXN", "ADD_SUBSCRIPTION_TO_TXN", "ADD_PARTITION_TO_TXN"]
    assert list(fake.sent[0].addPartitionToTxn.partitions) == ["t"]
    sub = fake.sent[1].addSubscriptionToTxn
    assert (sub.txnid_most_bits, sub.txnid_least_bits) == (0, 5)


async def test_commit_waits_for_the_operations_under_way() -> None:
    fake = FakeCoordinators()
    txn = _txn(fake)
    op: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    txn.track(op)
    commit = asyncio.ensure_future(txn.commit())
    await asyncio.sleep(0)  # one loop turn: the commit runs up to its wait for the operation (no time passes)
    assert "END_TXN" not in fake.types() and txn.state is TransactionState.COMMITTING
    op.set_result(None)
    await commit
    assert fake.sent[-1].endTxn.txn_action == pb.COMMIT and txn.state is TransactionState.COMMITTED
    with pytest.raises(InvalidTxnStatus):
        await txn.register_partition("late")


async def test_a_failed_operation_turns_commit_into_abort() -> None:
    fake = FakeCoordinators()
    txn = _txn(fake)
    op: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    txn.track(op)
    op.set_exception(RuntimeError("send failed"))
    with pytest.raises(InvalidTxnStatus, match="send failed"):
        await txn.commit()
    assert fake.sent[-1].endTxn.txn_action == pb.ABORT and txn.state is TransactionState.ABORTED


async def test_a_failure_among_many_settled_operations_still_turns_commit_into_abort() -> None:
    """Settled operations are dropped in passes as more are tracked; a failure dropped that way still counts."""
    fake = FakeCoordinators()
    txn = _txn(fake)
    loop = asyncio.get_running_loop()
    for i in range(5_000):  # several passes over the tracked operations
        op: asyncio.Future[None] = loop.create_future()
        if i == 10:
            op.set_exception(RuntimeError("send 10 failed"))
        else:
            op.set_result(None)
        txn.track(op)
    last: asyncio.Future[None] = loop.create_future()
    txn.track(last)  # still under way when commit starts
    commit = asyncio.ensure_future(txn.commit())
    await asyncio.sleep(0)  # one loop turn: the commit waits for the last operation
    assert "END_TXN" not in fake.types()
    last.set_result(None)
    with pytest.raises(InvalidTxnStatus, match="send 10 failed"):
        await commit
    assert fake.sent[-1].endTxn.txn_action == pb.ABORT and txn.state is TransactionState.ABORTED


async def test_context_manager_commits_or_aborts() -> None:
    fake = FakeCoordinators()
    async with _txn(fake) as txn:
        pass
    assert txn.state is TransactionState.COMMITTED
    with pytest.raises(ValueError, match="boom"):
        async with _txn(fake) as txn:
            raise ValueError("boom")
    assert txn.state is TransactionState.ABORTED and fake.sent[-1].endTxn.txn_action == pb.ABORT


async def test_a_refused_end_leaves_the_outcome_to_the_coordinator() -> None:
    fake = FakeCoordinators()
    txn = _txn(fake)
    fake.fail_end = TransactionNotFound("timed out")
    with pytest.raises(TransactionNotFound):
        await txn.commit()
    assert txn.state is TransactionState.ERROR
    fake.fail_end = None
    await txn.abort()
    assert txn.state is TransactionState.ABORTED


async def test_commit_and_abort_flush_the_batches_holding_their_messages_first() -> None:
    fake = FakeCoordinators()
    flushed: list[str] = []
    for end in ("commit", "abort"):
        txn = _txn(fake)
        op: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        txn.track(op)

        def flush(op: asyncio.Future[None] = op, end: str = end) -> None:
            flushed.append(end)
            op.set_result(None)  # the batch went: its send is answered

        txn.flush_before_end(flush)
        txn.flush_before_end(flush)  # a producer registers once per message: flushed once
        await asyncio.wait_for(txn.commit() if end == "commit" else txn.abort(), 5)
    assert flushed == ["commit", "abort"]
