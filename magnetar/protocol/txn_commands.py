"""Builders for the transaction-coordinator commands (types 50-57 and 62-63), each returning a ``pb.BaseCommand``.

The client sends TC_CLIENT_CONNECT_REQUEST, NEW_TXN, ADD_PARTITION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN and
END_TXN; the coordinator answers each with its ``*_RESPONSE``, which carries ``error``/``message`` on
failure (never a generic ERROR). Transaction ids are ``(most, least)``. Kept apart from ``commands`` so that
module stays one size; builders only shape data.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from magnetar.protocol.proto import PulsarApi_pb2 as pb

__all__ = [
    "RESPONSE_FIELDS",
    "add_partition_to_txn",
    "add_subscription_to_txn",
    "end_txn",
    "new_txn",
    "tc_client_connect",
    "txn_response",
]

T: Final = pb.BaseCommand
TxnIdBits = tuple[int, int]  # (most, least)

# request type -> (response type, response sub-message field)
RESPONSE_FIELDS: Final[dict[int, tuple[int, str]]] = {
    T.TC_CLIENT_CONNECT_REQUEST: (T.TC_CLIENT_CONNECT_RESPONSE, "tcClientConnectResponse"),
    T.NEW_TXN: (T.NEW_TXN_RESPONSE, "newTxnResponse"),
    T.ADD_PARTITION_TO_TXN: (T.ADD_PARTITION_TO_TXN_RESPONSE, "addPartitionToTxnResponse"),
    T.ADD_SUBSCRIPTION_TO_TXN: (T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, "addSubscriptionToTxnResponse"),
    T.END_TXN: (T.END_TXN_RESPONSE, "endTxnResponse"),
}


def tc_client_connect(request_id: int, tc_id: int) -> pb.BaseCommand:
    cmd = T(type=T.TC_CLIENT_CONNECT_REQUEST)
    cmd.tcClientConnectRequest.request_id = request_id
    cmd.tcClientConnectRequest.tc_id = tc_id
    return cmd


def new_txn(request_id: int, tc_id: int, ttl_ms: int) -> pb.BaseCommand:
    """NEW_TXN; ``txn_ttl_seconds`` carries milliseconds, as the Java client and coordinator use it."""
    cmd = T(type=T.NEW_TXN)
    cmd.newTxn.request_id = request_id
    cmd.newTxn.tc_id = tc_id
    cmd.newTxn.txn_ttl_seconds = ttl_ms
    return cmd


def add_partition_to_txn(request_id: int, txn: TxnIdBits, partitions: Iterable[str]) -> pb.BaseCommand:
    cmd = T(type=T.ADD_PARTITION_TO_TXN)
    sub = cmd.addPartitionToTxn
    sub.request_id = request_id
    sub.txnid_most_bits, sub.txnid_least_bits = txn
    sub.partitions.extend(partitions)
    return cmd


def add_subscription_to_txn(
    request_id: int, txn: TxnIdBits, subscriptions: Iterable[tuple[str, str]]
) -> pb.BaseCommand:
    cmd = T(type=T.ADD_SUBSCRIPTION_TO_TXN)
    sub = cmd.addSubscriptionToTxn
    sub.request_id = request_id
    sub.txnid_most_bits, sub.txnid_least_bits = txn
    sub.subscription.extend(pb.Subscription(topic=t, subscription=s) for t, s in subscriptions)
    return cmd


def end_txn(request_id: int, txn: TxnIdBits, action: int) -> pb.BaseCommand:
    cmd = T(type=T.END_TXN)
    sub = cmd.endTxn
    sub.request_id = request_id
    sub.txnid_most_bits, sub.txnid_least_bits = txn
    sub.txn_action = action  # type: ignore[assignment]
    return cmd


def txn_response(
    request_type: int,
    request_id: int,
    txn: TxnIdBits | None = None,
    *,
    code: int | None = None,
    message: str | None = None,
) -> pb.BaseCommand:
    """The response to a TC request of ``request_type``: success (with the txn id where the response has
    one) or ``code``/``message``."""
    response_type, field = RESPONSE_FIELDS[request_type]
    cmd = T(type=response_type)  # type: ignore[arg-type]
    sub = getattr(cmd, field)
    sub.request_id = request_id
    if txn is not None and response_type != T.TC_CLIENT_CONNECT_RESPONSE:
        sub.txnid_most_bits, sub.txnid_least_bits = txn
    if code is not None:
        sub.error = code
        sub.message = message or ""
    return cmd
