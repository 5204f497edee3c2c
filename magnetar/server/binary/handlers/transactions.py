"""Transaction-coordinator commands: TC_CLIENT_CONNECT_REQUEST, NEW_TXN, ADD_PARTITION_TO_TXN,
ADD_SUBSCRIPTION_TO_TXN, END_TXN.

Each is answered with its own ``*_RESPONSE`` (an error code and message on failure, as the Java client
expects), never a generic ERROR, and a failure leaves the connection usable. The coordinator writes its log
before any of these answers. With transactions disabled every command gets TransactionCoordinatorNotFound.

With authentication on, NEW_TXN records the connection's role as the transaction's owner (in the log, so
it survives a restart); every later command on it (and a transactional SEND or ACK, see ``txn_topic``) must
come from that role or, with authorization on, a super-user: anyone else gets TransactionNotFound.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from magnetar import protocol as proto
from magnetar.broker.errors import BrokerError, NotAllowed, TopicNotFound
from magnetar.broker.names import TopicName
from magnetar.broker.transactions.api import CoordinatorNotFound, TransactionNotFound, TxnAction, TxnError, TxnId
from magnetar.broker.transactions.coordinators import TransactionCoordinatorService, is_coordinator_log
from magnetar.server.binary.session import Handler, Session

T = proto.pb.BaseCommand
TxnWork = Callable[[TransactionCoordinatorService], Awaitable[TxnId | None]]


def _bits(txn: TxnId | None) -> tuple[int, int] | None:
    return None if txn is None else (txn.most, txn.least)


async def _answer(conn: Session, request_type: int, request_id: int, txn: TxnId | None,
                  work: TxnWork) -> None:
    """Run ``work`` against the coordinators and answer with ``request_type``'s response."""
    service = conn.broker.txn_coordinators
    try:
        if service is None:
            raise CoordinatorNotFound("Transaction coordinator is not enabled on this broker "
                                      "(transactionCoordinatorEnabled=false)")
        result = await work(service)
    except BrokerError as exc:
        reply = proto.txn_commands.txn_response(
            request_type, request_id, _bits(txn), code=exc.server_error, message=str(exc) or type(exc).__name__
        )
    else:
        reply = proto.txn_commands.txn_response(request_type, request_id, _bits(result or txn))
    conn.send_frame(proto.encode_command(reply))


def _authenticated_role(conn: Session) -> str | None:
    """The owner a NEW_TXN records: the connection's role when authentication is on (Pulsar's principal)."""
    return conn.auth.role if conn.auth.security.authn is not None else None


def require_owner(conn: Session, txn: TxnId, owner: str | None) -> None:
    """Pulsar's rule: a transaction opened by an authenticated role is used by that role, or by a super-user
    when authorization is on; anyone else is told it does not exist (TransactionNotFound)."""
    role = conn.auth.role
    if owner is None or owner == role:
        return
    authz = conn.auth.security.authz
    if authz is not None and authz.is_super_user(role):
        return
    raise TransactionNotFound(f"Client ({role}) is neither the owner of the transaction {txn} nor a super user")


async def _checked_topics(conn: Session, names: Iterable[str]) -> None:
    """Every name a transaction registers must be able to hold its entries or acks: a persistent topic (not
    a coordinator's log, not a partitioned topic's own name) in a namespace that exists. Checked when added,
    so a commit never meets a participant that can only refuse (and never answers failed although applied)."""
    for text in names:
        topic = TopicName.parse(text)  # InvalidTopicName
        if str(topic) in conn.broker.registry.loaded:
            continue  # served here: it exists
        if not topic.persistent or is_coordinator_log(topic):
            raise NotAllowed(f"{text} cannot be part of a transaction: only persistent topics can")
        if not await conn.broker.catalog.namespace_exists(topic.namespace_name):
            raise TopicNotFound(f"Namespace {topic.namespace_name} does not exist: {text} cannot be in a transaction")
        if await conn.broker.catalog.partition_count(topic) > 0:
            raise NotAllowed(f"{text} is a partitioned topic: add its partitions to the transaction")


def _txn_of(sub: proto.pb.CommandAddPartitionToTxn | proto.pb.CommandAddSubscriptionToTxn
            | proto.pb.CommandEndTxn) -> TxnId:
    return TxnId(sub.txnid_most_bits, sub.txnid_least_bits)


def on_tc_client_connect(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> Awaitable[None]:
    req = cmd.tcClientConnectRequest

    async def work(service: TransactionCoordinatorService) -> None:
        service.connect(req.tc_id)

    return _answer(conn, T.TC_CLIENT_CONNECT_REQUEST, req.request_id, None, work)


def _check_open_txns(conn: Session, service: TransactionCoordinatorService) -> None:
    """``maxOpenTransactionsPerConnection``: at the cap, forget the ones that ended, then refuse if still full."""
    cap = conn.broker.config.max_open_transactions_per_connection
    if cap <= 0 or len(conn.open_txns) < cap:
        return
    conn.open_txns.difference_update([t for t in conn.open_txns if not service.is_open(t)])
    if len(conn.open_txns) >= cap:
        raise NotAllowed(f"This connection has {len(conn.open_txns)} open transactions, the limit "
                         f"(maxOpenTransactionsPerConnection): end some first")


def on_new_txn(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> Awaitable[None]:
    req = cmd.newTxn

    async def work(service: TransactionCoordinatorService) -> TxnId:
        _check_open_txns(conn, service)
        # milliseconds, as Java sends it
        txn = await service.new_txn(req.tc_id, req.txn_ttl_seconds, _authenticated_role(conn))
        conn.open_txns.add(txn)
        return txn

    return _answer(conn, T.NEW_TXN, req.request_id, None, work)


def on_add_partition(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> Awaitable[None]:
    req = cmd.addPartitionToTxn
    txn = _txn_of(req)

    async def work(service: TransactionCoordinatorService) -> None:
        require_owner(conn, txn, service.owner_of(txn))
        await _checked_topics(conn, req.partitions)
        await service.add_partitions(txn, list(req.partitions))

    return _answer(conn, T.ADD_PARTITION_TO_TXN, req.request_id, txn, work)


def on_add_subscription(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> Awaitable[None]:
    req = cmd.addSubscriptionToTxn
    txn = _txn_of(req)

    async def work(service: TransactionCoordinatorService) -> None:
        require_owner(conn, txn, service.owner_of(txn))
        await _checked_topics(conn, {s.topic for s in req.subscription})
        await service.add_subscriptions(txn, [(s.topic, s.subscription) for s in req.subscription])

    return _answer(conn, T.ADD_SUBSCRIPTION_TO_TXN, req.request_id, txn, work)


def on_end_txn(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> Awaitable[None]:
    req = cmd.endTxn
    txn = _txn_of(req)

    async def work(service: TransactionCoordinatorService) -> None:
        if not req.HasField("txn_action") or int(req.txn_action) not in (0, 1):
            raise TxnError(f"END_TXN for {txn} needs txn_action COMMIT or ABORT")
        require_owner(conn, txn, service.owner_of(txn))
        await service.end_txn(txn, TxnAction(req.txn_action))
        conn.open_txns.discard(txn)

    return _answer(conn, T.END_TXN, req.request_id, txn, work)


HANDLERS: dict[int, Handler] = {
    T.TC_CLIENT_CONNECT_REQUEST: on_tc_client_connect,
    T.NEW_TXN: on_new_txn,
    T.ADD_PARTITION_TO_TXN: on_add_partition,
    T.ADD_SUBSCRIPTION_TO_TXN: on_add_subscription,
    T.END_TXN: on_end_txn,
}
