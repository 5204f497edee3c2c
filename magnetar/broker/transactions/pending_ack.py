"""A subscription's pending-ack store: acks made inside a transaction wait here until it ends.

While a transaction is open its acks are neither real (the cursor does not move) nor forgotten: the acked
messages are not dispatched again, and no other transaction may ack them (``TransactionConflict``). Commit
applies the acks to the cursor and logs the commit; abort drops them and gives the messages back for
redelivery.

A commit writes nothing to the metadata store: the cursor persists on its own schedule, and until it has
persisted the committed acks, the log keeps them (their records are released only after a cursor flush that
follows the commit, at most one per ``cursor_persist_interval_ms``, usually a no-op because the cursor's own
debounced write came first). Replay re-applies the acks of a logged commit whose records are still there, as
Pulsar's pending-ack replay does, so a crash between the commit and the cursor's write loses none of them.

Rules, as Pulsar has them: an individual ack conflicts with an ack (pending in another transaction, or
already real) of the same entry or of the same batch indexes; one transaction at a time may hold a pending
cumulative ack, on exactly one message id, on an Exclusive or Failover subscription, past the mark-delete
position, and not across another transaction's pending individual ack. Each ACK is validated whole before
anything is reserved, and written to the log before it is answered, so nothing is half-applied and an
answered ack survives a crash.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from magnetar.broker.errors import NotAllowed, PersistenceError
from magnetar.broker.subscription.consumer import SubType
from magnetar.broker.subscription.subscription import Subscription
from magnetar.broker.transactions.api import TransactionConflict, TxnAction, TxnId
from magnetar.broker.transactions.pending_ack_log import WHOLE, AckedId, AckRecord, EndRecord, PendingAckLog
from magnetar.ledger.api import ManagedLedgerError, Position
from magnetar.ledger.bitset import all_set, int_to_words, words_to_int

log = logging.getLogger("magnetar.broker.transactions.pending_ack")

SleepMs = Callable[[int], Awaitable[None]]


async def asyncio_sleep_ms(delay_ms: int) -> None:
    await asyncio.sleep(delay_ms / 1000)


@dataclass
class _TxnAcks:
    individual: dict[Position, AckedId] = field(default_factory=dict)
    cumulative: Position | None = None


def _overlap(a: int, b: int) -> bool:
    return a == WHOLE or b == WHOLE or (a & b) != 0


def _merge(a: int, b: int) -> int:
    return WHOLE if a == WHOLE or b == WHOLE else a | b


class PendingAckStore:
    def __init__(
        self,
        topic: str,
        subscription: Subscription,
        ack_log: PendingAckLog,
        *,
        release_delay_ms: int = 100,
        sleep_ms: SleepMs = asyncio_sleep_ms,
    ) -> None:
        self.topic = topic
        self.sub = subscription
        self._log = ack_log
        self._release_delay_ms = release_delay_ms  # the cursor's persist interval: its own write comes first
        self._sleep_ms = sleep_ms
        self._committed: list[object] = []  # records of commits the cursor may not have persisted yet
        self._releaser: asyncio.Task[None] | None = None
        self._txns: dict[TxnId, _TxnAcks] = {}
        self._owners: dict[Position, dict[TxnId, int]] = {}  # entry -> txn -> mask it acked
        self._cumulative: tuple[TxnId, Position] | None = None
        self._handles: dict[TxnId, list[object]] = {}  # the log records of each open transaction
        self.committed_total = 0
        self.aborted_total = 0
        self.acks_total = 0

    @property
    def log(self) -> PendingAckLog:
        return self._log

    # ---- what dispatch asks ------------------------------------------------------------------------------

    def is_pending(self, position: Position) -> bool:
        """The whole entry is acked by an open transaction: do not dispatch it."""
        owners = self._owners.get(position)
        return owners is not None and WHOLE in owners.values()

    def has_pending(self) -> bool:
        """Some entry is acked by an open transaction (dispatch then asks entry by entry)."""
        return bool(self._owners)

    def pending_mask(self, position: Position) -> int:
        """Batch indexes of ``position`` acked by open transactions (0 if none)."""
        mask = 0
        for m in self._owners.get(position, {}).values():
            mask = _merge(mask, m)
        return mask

    def in_progress(self) -> dict[TxnId, _TxnAcks]:
        return dict(self._txns)

    @property
    def cumulative(self) -> tuple[TxnId, Position] | None:
        return self._cumulative

    # ---- acks --------------------------------------------------------------------------------------------

    async def acknowledge(self, txn: TxnId, cumulative: bool, ids: Sequence[AckedId]) -> None:
        """Validate, reserve, log; on a failed write nothing stays reserved."""
        if cumulative:
            self._check_cumulative(txn, ids)
            ids = self._split_partial_cumulative(txn, ids[0])
            if len(ids) == 2 and ids[0].position <= self.sub.cursor.mark_delete_position:
                cumulative, ids = False, ids[1:]  # nothing before the batch is left: only its indexes
        if not cumulative:
            for acked in ids:
                self._check_individual(txn, acked)
        record = AckRecord(txn, cumulative, tuple(ids))
        undo = self._reserve(record)
        try:
            handle = await self._log.append(record)
        except ManagedLedgerError as exc:
            undo()
            raise PersistenceError(f"Failed to persist the pending ack of {txn} on {self.topic}: {exc}") from exc
        self._handles.setdefault(txn, []).append(handle)
        self.acks_total += 1

    def _split_partial_cumulative(self, txn: TxnId, acked: AckedId) -> list[AckedId]:
        """A cumulative ack inside a batch: everything before its entry, plus those batch indexes."""
        if acked.mask == WHOLE:
            return [acked]
        pos = acked.position
        partial = AckedId(pos, acked.mask, acked.batch_size)
        self._check_individual(txn, partial)
        return [AckedId(Position(pos.ledger_id, pos.entry_id - 1), WHOLE, 0), partial]

    def _conflict(self, txn: TxnId, position: Position, why: str) -> TransactionConflict:
        where = f"[{self.topic}][{self.sub.name}]"
        return TransactionConflict(f"{where} Transaction:{txn} try to ack message:{position} {why}")

    def _check_individual(self, txn: TxnId, acked: AckedId) -> None:
        pos = acked.position
        cursor = self.sub.cursor
        if pos <= cursor.mark_delete_position or cursor.is_acknowledged(pos):
            raise self._conflict(txn, pos, "already acked before.")
        if acked.mask != WHOLE:
            words = cursor.batch_ack_set(pos)
            if words is not None and acked.mask & ~words_to_int(words, acked.batch_size):
                raise self._conflict(txn, pos, "already acked before.")
        for owner, mask in self._owners.get(pos, {}).items():
            if owner != txn and _overlap(mask, acked.mask):
                raise self._conflict(txn, pos, "in pending ack status.")
        if self._cumulative is not None and self._cumulative[0] != txn and pos <= self._cumulative[1]:
            raise self._conflict(txn, pos, "in pending ack status.")

    def _check_cumulative(self, txn: TxnId, ids: Sequence[AckedId]) -> None:
        if len(ids) != 1:
            raise NotAllowed("A cumulative ack in a transaction takes exactly one message id")
        if self.sub.sub_type in (SubType.SHARED, SubType.KEY_SHARED):
            raise NotAllowed(f"Cumulative ack is not allowed on the {SubType.LABELS.get(self.sub.sub_type)} "
                             f"subscription {self.sub.name!r}")
        pos = ids[0].position
        if self._cumulative is not None and self._cumulative[0] != txn:
            raise TransactionConflict(
                f"[{self.topic}][{self.sub.name}] Transaction:{txn} try to cumulative ack message while "
                f"transaction:{self._cumulative[0]} already cumulative acked messages."
            )
        if pos <= self.sub.cursor.mark_delete_position:
            raise self._conflict(txn, pos, "already acked before.")
        for owned, owners in self._owners.items():
            if owned <= pos and any(owner != txn for owner in owners):
                raise self._conflict(txn, owned, "in pending ack status.")

    def _reserve(self, record: AckRecord) -> Callable[[], None]:
        txn = record.txn
        acks = self._txns.setdefault(txn, _TxnAcks())
        before_cumulative = self._cumulative
        before_acks = dict(acks.individual)
        before_owned = {i.position: dict(self._owners.get(i.position, {})) for i in record.ids}
        before_txn_cumulative = acks.cumulative
        individual = record.ids
        if record.cumulative:  # the first id is cumulative; any others are batch indexes of the next entry
            pos, individual = record.ids[0].position, record.ids[1:]
            if acks.cumulative is None or pos > acks.cumulative:
                acks.cumulative = pos
                self._cumulative = (txn, pos)
        for acked in individual:
            prior = acks.individual.get(acked.position)
            mask = acked.mask if prior is None else _merge(prior.mask, acked.mask)
            acks.individual[acked.position] = AckedId(acked.position, mask, acked.batch_size)
            self._owners.setdefault(acked.position, {})[txn] = mask

        def undo() -> None:
            acks.individual = before_acks
            acks.cumulative = before_txn_cumulative
            self._cumulative = before_cumulative
            for pos, owners in before_owned.items():
                if owners:
                    self._owners[pos] = owners
                else:
                    self._owners.pop(pos, None)
            if not acks.individual and acks.cumulative is None:
                self._txns.pop(txn, None)

        return undo

    # ---- ending ------------------------------------------------------------------------------------------

    async def end(self, txn: TxnId, action: TxnAction) -> None:
        """Commit: make the acks real on the cursor, then log the end. Abort: log the end, then release."""
        acks = self._txns.get(txn)
        if acks is None:
            return  # nothing acked here, or already ended: idempotent
        try:
            if action is TxnAction.COMMIT:
                self._apply(acks)  # a failed end leaves them applied: the coordinator only ever retries a commit
            end = await self._log.append(EndRecord(txn, action))
        except ManagedLedgerError as exc:
            raise PersistenceError(f"Failed to end {txn} on {self.topic} / {self.sub.name}: {exc}") from exc
        self._forget(txn, acks)
        records = [*self._handles.pop(txn, []), end]
        if action is TxnAction.COMMIT:
            self.committed_total += 1
            self._release_once_persisted(records)
        else:
            self.aborted_total += 1
            self._log.release(records)  # recovery no longer needs any of them
            self._release(acks)

    def _release_once_persisted(self, records: list[object]) -> None:
        """Release a commit's records after the cursor has persisted its acks (one flush for many commits)."""
        self._committed.extend(records)
        if self._releaser is None:
            self._releaser = asyncio.get_running_loop().create_task(self._release_committed())

    async def committed_released(self) -> None:
        """Wait until the records of every commit so far were released (or the release gave up for now)."""
        while self._releaser is not None:  # bounded: each wait ends one releaser; none restarts without a commit
            await asyncio.gather(asyncio.shield(self._releaser), return_exceptions=True)

    async def _release_committed(self) -> None:
        while self._committed:  # a pass per cursor flush; ends once no commit waits (more come only with load)
            await self._sleep_ms(self._release_delay_ms)
            records, self._committed = self._committed, []
            try:
                await self.sub.cursor.flush()  # covers every commit applied before it started
            except ManagedLedgerError as exc:  # closed or fenced: a later load replays and re-applies them
                log.debug("%s / %s: committed acks stay in the log: %s", self.topic, self.sub.name, exc)
                self._committed[:0] = records
                break
            self._log.release(records)
        self._releaser = None

    def _apply(self, acks: _TxnAcks) -> None:
        cursor = self.sub.cursor
        whole: list[Position] = []
        for acked in acks.individual.values():
            if acked.mask == WHOLE:
                whole.append(acked.position)
            else:
                unacked = all_set(acked.batch_size) & ~acked.mask
                cursor.acknowledge_batch_indexes(acked.position, int_to_words(unacked), acked.batch_size)
                if cursor.is_acknowledged(acked.position):
                    whole.append(acked.position)
        if whole:
            cursor.acknowledge(whole)
        forgotten: list[Position] = list(whole)
        for consumer in self.sub.consumers:
            for p in whole:
                consumer.forget(p)
            if acks.cumulative is not None:
                forgotten.extend(consumer.forget_up_to(acks.cumulative))
        if acks.cumulative is not None:
            cursor.acknowledge_cumulative(acks.cumulative)
        if self.sub.dispatcher is not None:
            self.sub.dispatcher.acknowledged(forgotten)
            self.sub.dispatcher.wake()

    def _forget(self, txn: TxnId, acks: _TxnAcks) -> None:
        del self._txns[txn]
        for pos in acks.individual:
            owners = self._owners.get(pos)
            if owners is not None:
                owners.pop(txn, None)
                if not owners:
                    del self._owners[pos]
        if self._cumulative is not None and self._cumulative[0] == txn:
            self._cumulative = None

    def _release(self, acks: _TxnAcks) -> None:
        if self.sub.dispatcher is None:
            return
        released = list(acks.individual)
        if acks.cumulative is not None:
            released.append(acks.cumulative)
        self.sub.dispatcher.released(released)

    # ---- recovery ----------------------------------------------------------------------------------------

    async def recover(self) -> None:
        """Replay the log: acks of transactions without an end record are pending again."""
        for handle, record in await self._log.replay():
            if isinstance(record, EndRecord):  # ended, but the release had not reached the log before a crash
                acks = self._txns.get(record.txn)
                if acks is not None:
                    if record.action is TxnAction.COMMIT:
                        self._apply(acks)  # the cursor may not have persisted them: idempotent if it did
                    self._forget(record.txn, acks)
                records = [*self._handles.pop(record.txn, []), handle]
                if record.action is TxnAction.COMMIT:
                    self._release_once_persisted(records)
                else:
                    self._log.release(records)
            else:
                self._reserve(record)
                self._handles.setdefault(record.txn, []).append(handle)
        if self._txns:
            log.info("%s / %s: %d transactions with pending acks recovered", self.topic, self.sub.name,
                     len(self._txns))

    async def close(self) -> None:
        releaser, self._releaser = self._releaser, None
        if releaser is not None:
            releaser.cancel()
            await asyncio.gather(releaser, return_exceptions=True)
        await self._log.close()


