"""The topic side of transactions on the wire: END_TXN_ON_PARTITION, END_TXN_ON_SUBSCRIPTION, and the
transactional paths of SEND and ACK (the produce and consume handlers call in here).

A transactional SEND or ACK is first checked with the coordinator (``Broker.txn_registry``: None
when transactions are disabled); a refusal is answered with the transaction error's wire code (SEND_ERROR,
or ACK_RESPONSE with ``error``) and nothing is written. A SEND's txn id must match the one in its message
metadata (the stored one, which recovery reads). Transactional acks are always answered with ACK_RESPONSE,
once the pending ack is durable. Nothing here tears down the connection.

END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION are a coordinator's commands to its participants, never a
client's: with authorization on only a super-user may send them (Pulsar's rule), and whoever sends them
may end a transaction only as its coordinator decided (it is COMMITTING or ABORTING on this broker).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from magnetar import protocol as proto
from magnetar.broker.errors import BrokerError, ConsumerNotFound, NotAllowed, ServiceNotReady
from magnetar.broker.subscription.consumer import Consumer
from magnetar.broker.subscription.subscription import ACK_CUMULATIVE, Subscription
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.broker.transactions.api import TransactionNotFound, TxnAction, TxnId
from magnetar.broker.transactions.listener import transactions_of
from magnetar.broker.transactions.pending_ack_log import WHOLE, AckedId
from magnetar.ledger.api import Position
from magnetar.ledger.bitset import all_set, words_to_int
from magnetar.server.binary.handlers.transactions import require_owner
from magnetar.server.binary.session import Handler, Session

T = proto.pb.BaseCommand
log = logging.getLogger("magnetar.server.txn_topic")

DISABLED = "Transactions are not enabled on this broker (transactionCoordinatorEnabled=false)"


def _code(exc: BrokerError) -> int:
    return int(getattr(exc, "server_error", proto.ServerErrorCode.UnknownError))


# ---- SEND -------------------------------------------------------------------------------------------------


def send_refusal(
    conn: Session, req: proto.pb.CommandSend, metadata: proto.pb.MessageMetadata, topic: str
) -> BrokerError | None:
    """Why a SEND may not be written as it stands (None: it may; plain SENDs return at once)."""
    in_send = req.HasField("txnid_most_bits") or req.HasField("txnid_least_bits")
    in_meta = metadata.HasField("txnid_most_bits") or metadata.HasField("txnid_least_bits")
    if not in_send and not in_meta:
        return None
    registry = conn.broker.txn_registry
    if registry is None:
        return NotAllowed(DISABLED)
    txn = TxnId(int(metadata.txnid_most_bits), int(metadata.txnid_least_bits))
    if in_send and (not in_meta or TxnId(int(req.txnid_most_bits), int(req.txnid_least_bits)) != txn):
        return NotAllowed("The SEND's transaction id differs from the one in its message metadata")
    try:
        registry.check_produce(txn, topic)
        require_owner(conn, txn, registry.owner_of(txn))
    except BrokerError as exc:
        return exc
    return None


# ---- ACK --------------------------------------------------------------------------------------------------


def is_txn_ack(req: proto.pb.CommandAck) -> bool:
    return req.HasField("txnid_most_bits") or req.HasField("txnid_least_bits")


def _acked_id(consumer: Consumer, mid: proto.pb.MessageIdData) -> AckedId | None:
    position = Position(proto.ids.signed(mid.ledgerId), proto.ids.signed(mid.entryId))
    if not mid.ack_set:
        return AckedId(position, WHOLE, 0)
    size = Subscription._batch_size(consumer, mid)
    mask = all_set(size) & ~words_to_int(list(mid.ack_set), size)
    return AckedId(position, mask, size) if mask else None


async def on_txn_ack(
    conn: Session,
    req: proto.pb.CommandAck,
    found: tuple[Consumer, PersistentTopic, Subscription] | None,
) -> None:
    txn = TxnId(int(req.txnid_most_bits), int(req.txnid_least_bits))
    code: int | None = None
    message: str | None = None
    try:
        await _txn_ack(conn, req, found, txn)
    except BrokerError as exc:
        code, message = _code(exc), str(exc) or type(exc).__name__
    cmd = proto.commands.ack_response(
        req.consumer_id, req.request_id, code=code, message=message, txnid=(txn.most, txn.least)
    )
    conn.send_frame(proto.encode_command(cmd))


async def _txn_ack(
    conn: Session,
    req: proto.pb.CommandAck,
    found: tuple[Consumer, PersistentTopic, Subscription] | None,
    txn: TxnId,
) -> None:
    if found is None:
        raise ConsumerNotFound(f"Consumer {req.consumer_id} not found on this connection")
    consumer, topic, sub = found
    registry = conn.broker.txn_registry
    if registry is None:
        raise NotAllowed(DISABLED)
    registry.check_ack(txn, str(topic.name), sub.name)
    require_owner(conn, txn, registry.owner_of(txn))
    transactions = transactions_of(topic.txn)
    if transactions is None:
        raise ServiceNotReady(f"Topic {topic.name} has no transaction buffer")
    ids = [a for a in (_acked_id(consumer, mid) for mid in req.message_id) if a is not None]
    if not ids:
        return
    await transactions.acknowledge(sub, txn, req.ack_type == ACK_CUMULATIVE, ids)


# ---- END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION --------------------------------------------------------


def _action(value: int) -> TxnAction:
    try:
        return TxnAction(value)
    except ValueError as exc:
        raise NotAllowed(f"Unknown transaction action {value}") from exc


def _coordinator_only(conn: Session, txn: TxnId, action: TxnAction) -> None:
    """These are a coordinator's commands to its participants: with authorization on only a super-user
    (the role brokers talk to each other with) may send them, as in Pulsar, and in any case the outcome
    must be the one the transaction's coordinator decided (a client cannot end a partition its own way)."""
    registry = conn.broker.txn_registry
    if registry is None:
        raise NotAllowed(DISABLED)
    if not conn.auth.is_super_user():
        raise TransactionNotFound(
            f"TC client ({conn.auth.role}) is not a super user, and is not allowed to operate on transaction {txn}")
    registry.check_decided(txn, action)


async def _answer_end(
    conn: Session, reply: proto.pb.BaseCommand, out: Any, request_id: int, txn: TxnId,
    end: Callable[[], Awaitable[None]],
) -> None:
    """Run ``end`` and answer with ``reply`` (whose sub-message is ``out``), the error in it if any."""
    out.request_id, out.txnid_most_bits, out.txnid_least_bits = request_id, txn.most, txn.least
    try:
        if conn.broker.txn_registry is None:
            raise NotAllowed(DISABLED)
        await end()
    except BrokerError as exc:
        out.error, out.message = _code(exc), str(exc)
    conn.send_frame(proto.encode_command(reply))


async def on_end_txn_on_partition(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.endTxnOnPartition
    txn = TxnId(int(req.txnid_most_bits), int(req.txnid_least_bits))
    reply = T(type=T.END_TXN_ON_PARTITION_RESPONSE)

    async def end() -> None:
        if not req.HasField("txn_action") or not req.topic:
            raise NotAllowed("END_TXN_ON_PARTITION needs a topic and a transaction action")
        action = _action(req.txn_action)
        _coordinator_only(conn, txn, action)
        await conn.broker.txn_participants.end_txn_on_partition(req.topic, txn, action)

    await _answer_end(conn, reply, reply.endTxnOnPartitionResponse, req.request_id, txn, end)


async def on_end_txn_on_subscription(
    conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None
) -> None:
    req = cmd.endTxnOnSubscription
    txn = TxnId(int(req.txnid_most_bits), int(req.txnid_least_bits))
    reply = T(type=T.END_TXN_ON_SUBSCRIPTION_RESPONSE)

    async def end() -> None:
        if not req.HasField("txn_action") or not req.HasField("subscription"):
            raise NotAllowed("END_TXN_ON_SUBSCRIPTION needs a subscription and a transaction action")
        sub, action = req.subscription, _action(req.txn_action)
        _coordinator_only(conn, txn, action)
        await conn.broker.txn_participants.end_txn_on_subscription(sub.topic, sub.subscription, txn, action)

    await _answer_end(conn, reply, reply.endTxnOnSubscriptionResponse, req.request_id, txn, end)


HANDLERS: dict[int, Handler] = {
    T.END_TXN_ON_PARTITION: on_end_txn_on_partition,
    T.END_TXN_ON_SUBSCRIPTION: on_end_txn_on_subscription,
}
