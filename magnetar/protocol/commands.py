"""Builders for every command a broker or a client sends, each returning a ``pb.BaseCommand``.

One small function per command keeps the wire shape (which fields are set, which are left out)
in one place: e.g. MESSAGE leaves ``redelivery_count`` out when 0, as the Java broker does, and
PARTITIONED_METADATA_RESPONSE always sets ``response`` (clients treat its absence as failure).
Ledger and entry ids are taken signed (-1 allowed) and encoded as wire uint64.

Builders only shape data; they know nothing of connections, state or when to send.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from magnetar.protocol.ids import unsigned
from magnetar.protocol.proto import PulsarApi_pb2 as pb

__all__ = [
    "CLIENT_VERSION",
    "PROTOCOL_VERSION",
    "ack",
    "ack_response",
    "active_consumer_change",
    "close_consumer",
    "close_producer",
    "connect",
    "connected",
    "error",
    "flow",
    "get_last_message_id",
    "get_last_message_id_response",
    "get_schema_response_error",
    "get_topics_of_namespace",
    "get_topics_of_namespace_response",
    "lookup",
    "lookup_failure",
    "lookup_response",
    "message",
    "partitioned_metadata",
    "partitioned_metadata_failure",
    "partitioned_metadata_response",
    "ping",
    "pong",
    "producer",
    "producer_success",
    "redeliver",
    "seek",
    "send",
    "send_error",
    "send_receipt",
    "subscribe",
    "success",
    "unsubscribe",
]

T: Final = pb.BaseCommand
PROTOCOL_VERSION: Final = pb.v20  # highest version the 3.13 client (C++ 4.2.0) speaks
CLIENT_VERSION: Final = "magnetar"

# ---------------------------------------------------------------- helpers


def _key_values(values: Mapping[str, str] | None) -> list[pb.KeyValue]:
    return [pb.KeyValue(key=k, value=v) for k, v in (values or {}).items()]


def _set_txn(sub: pb.CommandSend | pb.CommandAck | pb.CommandAckResponse, txnid: tuple[int, int] | None) -> None:
    if txnid is not None:
        sub.txnid_most_bits, sub.txnid_least_bits = txnid


# ---------------------------------------------------------------- connection


def connect(
    client_version: str = CLIENT_VERSION,
    protocol_version: int = PROTOCOL_VERSION,
    *,
    auth_method_name: str = "none",
    auth_data: bytes | None = None,
    proxy_to_broker_url: str | None = None,
    supports_broker_entry_metadata: bool = False,
) -> pb.BaseCommand:
    cmd = T(type=T.CONNECT)
    c = cmd.connect
    c.client_version = client_version
    c.protocol_version = protocol_version
    c.auth_method_name = auth_method_name
    if auth_data is not None:
        c.auth_data = auth_data
    if proxy_to_broker_url is not None:
        c.proxy_to_broker_url = proxy_to_broker_url
    c.feature_flags.supports_auth_refresh = True
    c.feature_flags.supports_broker_entry_metadata = supports_broker_entry_metadata
    return cmd


def connected(server_version: str, protocol_version: int, max_message_size: int | None = None) -> pb.BaseCommand:
    cmd = T(type=T.CONNECTED)
    c = cmd.connected
    c.server_version = server_version
    c.protocol_version = protocol_version
    if max_message_size is not None:
        c.max_message_size = max_message_size
    return cmd


def ping() -> pb.BaseCommand:
    cmd = T(type=T.PING)
    cmd.ping.SetInParent()  # clients send the empty sub-message; so do we
    return cmd


def pong() -> pb.BaseCommand:
    cmd = T(type=T.PONG)
    cmd.pong.SetInParent()
    return cmd


# ---------------------------------------------------------------- generic replies


def success(request_id: int, schema: pb.Schema | None = None) -> pb.BaseCommand:
    cmd = T(type=T.SUCCESS)
    cmd.success.request_id = request_id
    if schema is not None:
        cmd.success.schema.CopyFrom(schema)
    return cmd


def error(request_id: int, code: int, message: str) -> pb.BaseCommand:
    cmd = T(type=T.ERROR)
    e = cmd.error
    e.request_id = request_id
    e.error = code  # type: ignore[assignment]
    e.message = message
    return cmd


def failure_for(request: pb.BaseCommand, request_id: int, code: int, message: str) -> pb.BaseCommand:
    """The reply refusing ``request``: lookups fail in their own response (the client waits on that), the
    rest with ERROR."""
    if request.type == T.LOOKUP:
        return lookup_failure(request_id, code, message)
    if request.type == T.PARTITIONED_METADATA:
        return partitioned_metadata_failure(request_id, code, message)
    return error(request_id, code, message)


# ---------------------------------------------------------------- discovery


def partitioned_metadata(topic: str, request_id: int) -> pb.BaseCommand:
    cmd = T(type=T.PARTITIONED_METADATA)
    cmd.partitionMetadata.topic = topic
    cmd.partitionMetadata.request_id = request_id
    return cmd


def partitioned_metadata_response(request_id: int, partitions: int) -> pb.BaseCommand:
    cmd = T(type=T.PARTITIONED_METADATA_RESPONSE)
    r = cmd.partitionMetadataResponse
    r.request_id = request_id
    r.partitions = partitions
    r.response = pb.CommandPartitionedTopicMetadataResponse.Success
    return cmd


def partitioned_metadata_failure(request_id: int, code: int, message: str) -> pb.BaseCommand:
    cmd = T(type=T.PARTITIONED_METADATA_RESPONSE)
    r = cmd.partitionMetadataResponse
    r.request_id = request_id
    r.response = pb.CommandPartitionedTopicMetadataResponse.Failed
    r.error = code  # type: ignore[assignment]
    r.message = message
    return cmd


def lookup(topic: str, request_id: int, *, authoritative: bool = False, listener_name: str = "") -> pb.BaseCommand:
    cmd = T(type=T.LOOKUP)
    q = cmd.lookupTopic
    q.topic = topic
    q.request_id = request_id
    q.authoritative = authoritative
    q.advertised_listener_name = listener_name
    return cmd


def lookup_response(
    request_id: int,
    broker_url: str,
    authoritative: bool = True,
    *,
    broker_url_tls: str | None = None,
    redirect: bool = False,
    proxy_through_service_url: bool = False,
) -> pb.BaseCommand:
    cmd = T(type=T.LOOKUP_RESPONSE)
    r = cmd.lookupTopicResponse
    r.request_id = request_id
    r.brokerServiceUrl = broker_url
    if broker_url_tls is not None:
        r.brokerServiceUrlTls = broker_url_tls
    kind = pb.CommandLookupTopicResponse
    r.response = kind.Redirect if redirect else kind.Connect
    r.authoritative = authoritative
    if proxy_through_service_url:
        r.proxy_through_service_url = True
    return cmd


def lookup_failure(request_id: int, code: int, message: str) -> pb.BaseCommand:
    cmd = T(type=T.LOOKUP_RESPONSE)
    r = cmd.lookupTopicResponse
    r.request_id = request_id
    r.response = pb.CommandLookupTopicResponse.Failed
    r.error = code  # type: ignore[assignment]
    r.message = message
    return cmd


def get_topics_of_namespace(
    request_id: int,
    namespace: str,
    mode: int = pb.CommandGetTopicsOfNamespace.PERSISTENT,
    *,
    topics_pattern: str | None = None,
    topics_hash: str | None = None,
) -> pb.BaseCommand:
    cmd = T(type=T.GET_TOPICS_OF_NAMESPACE)
    q = cmd.getTopicsOfNamespace
    q.request_id = request_id
    q.namespace = namespace
    q.mode = mode  # type: ignore[assignment]
    if topics_pattern is not None:
        q.topics_pattern = topics_pattern
    if topics_hash is not None:
        q.topics_hash = topics_hash
    return cmd


def get_topics_of_namespace_response(
    request_id: int,
    topics: Iterable[str],
    *,
    filtered: bool = False,
    topics_hash: str | None = None,
    changed: bool = True,
) -> pb.BaseCommand:
    cmd = T(type=T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
    r = cmd.getTopicsOfNamespaceResponse
    r.request_id = request_id
    r.topics.extend(topics)
    if filtered:
        r.filtered = True
    if topics_hash is not None:
        r.topics_hash = topics_hash
    if not changed:
        r.changed = False
    return cmd


def get_schema_response_error(request_id: int, code: int, message: str) -> pb.BaseCommand:
    """GET_SCHEMA failure; ``TopicNotFound`` is how clients learn there is no schema."""
    cmd = T(type=T.GET_SCHEMA_RESPONSE)
    r = cmd.getSchemaResponse
    r.request_id = request_id
    r.error_code = code  # type: ignore[assignment]
    r.error_message = message
    return cmd


# ---------------------------------------------------------------- producers


def producer(
    topic: str,
    producer_id: int,
    request_id: int,
    *,
    producer_name: str | None = None,
    epoch: int = 0,
    access_mode: int = pb.Shared,
    topic_epoch: int | None = None,
    metadata: Mapping[str, str] | None = None,
    schema: pb.Schema | None = None,
    txn_enabled: bool = False,
    initial_subscription_name: str | None = None,
) -> pb.BaseCommand:
    cmd = T(type=T.PRODUCER)
    p = cmd.producer
    p.topic = topic
    p.producer_id = producer_id
    p.request_id = request_id
    if producer_name is not None:
        p.producer_name = producer_name
    p.user_provided_producer_name = producer_name is not None
    p.encrypted = False
    p.epoch = epoch
    p.producer_access_mode = access_mode  # type: ignore[assignment]
    if topic_epoch is not None:
        p.topic_epoch = topic_epoch
    p.metadata.extend(_key_values(metadata))
    if schema is not None:
        p.schema.CopyFrom(schema)
    if txn_enabled:
        p.txn_enabled = True
    if initial_subscription_name is not None:
        p.initial_subscription_name = initial_subscription_name
    return cmd


def producer_success(
    request_id: int,
    producer_name: str,
    last_sequence_id: int = -1,
    topic_epoch: int | None = None,
    producer_ready: bool = True,
    *,
    schema_version: bytes | None = None,
) -> pb.BaseCommand:
    cmd = T(type=T.PRODUCER_SUCCESS)
    r = cmd.producer_success
    r.request_id = request_id
    r.producer_name = producer_name
    r.last_sequence_id = last_sequence_id
    if topic_epoch is not None:
        r.topic_epoch = topic_epoch
    if not producer_ready:
        r.producer_ready = False
    if schema_version is not None:
        r.schema_version = schema_version
    return cmd


def send(
    producer_id: int,
    sequence_id: int,
    num_messages: int | None = None,
    is_chunk: bool = False,
    highest_sequence_id: int | None = None,
    *,
    txnid: tuple[int, int] | None = None,
    marker: bool = False,
) -> pb.BaseCommand:
    """SEND command; ``num_messages`` only for batches, ``txnid`` is ``(most, least)``."""
    cmd = T(type=T.SEND)
    s = cmd.send
    s.producer_id = producer_id
    s.sequence_id = sequence_id
    if num_messages is not None:
        s.num_messages = num_messages
    if is_chunk:
        s.is_chunk = True
    if highest_sequence_id is not None:
        s.highest_sequence_id = highest_sequence_id
    if marker:
        s.marker = True
    _set_txn(s, txnid)
    return cmd


def send_receipt(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest_sequence_id: int | None = None
) -> pb.BaseCommand:
    cmd = T(type=T.SEND_RECEIPT)
    r = cmd.send_receipt
    r.producer_id = producer_id
    r.sequence_id = sequence_id
    r.message_id.ledgerId = unsigned(ledger_id)
    r.message_id.entryId = unsigned(entry_id)
    if highest_sequence_id is not None:
        r.highest_sequence_id = highest_sequence_id
    return cmd


def send_error(producer_id: int, sequence_id: int, code: int, message: str) -> pb.BaseCommand:
    cmd = T(type=T.SEND_ERROR)
    e = cmd.send_error
    e.producer_id = producer_id
    e.sequence_id = sequence_id
    e.error = code  # type: ignore[assignment]
    e.message = message
    return cmd


def close_producer(producer_id: int, request_id: int, *, assigned_broker_url: str | None = None) -> pb.BaseCommand:
    cmd = T(type=T.CLOSE_PRODUCER)
    c = cmd.close_producer
    c.producer_id = producer_id
    c.request_id = unsigned(request_id)
    if assigned_broker_url is not None:
        c.assignedBrokerServiceUrl = assigned_broker_url
    return cmd


# ---------------------------------------------------------------- consumers


def subscribe(
    topic: str,
    subscription: str,
    sub_type: int,
    consumer_id: int,
    request_id: int,
    *,
    consumer_name: str = "",
    durable: bool = True,
    start_message_id: pb.MessageIdData | None = None,
    initial_position: int = pb.CommandSubscribe.Latest,
    read_compacted: bool = False,
    replicate_subscription_state: bool = False,
    priority_level: int = 0,
    metadata: Mapping[str, str] | None = None,
    schema: pb.Schema | None = None,
    key_shared_meta: pb.KeySharedMeta | None = None,
) -> pb.BaseCommand:
    cmd = T(type=T.SUBSCRIBE)
    s = cmd.subscribe
    s.topic = topic
    s.subscription = subscription
    s.subType = sub_type  # type: ignore[assignment]
    s.consumer_id = consumer_id
    s.request_id = request_id
    s.consumer_name = consumer_name
    s.priority_level = priority_level
    s.durable = durable
    if start_message_id is not None:
        s.start_message_id.CopyFrom(start_message_id)
    s.metadata.extend(_key_values(metadata))
    s.read_compacted = read_compacted
    if schema is not None:
        s.schema.CopyFrom(schema)
    s.initialPosition = initial_position  # type: ignore[assignment]
    s.replicate_subscription_state = replicate_subscription_state
    if key_shared_meta is not None:
        s.keySharedMeta.CopyFrom(key_shared_meta)
    return cmd


def flow(consumer_id: int, permits: int) -> pb.BaseCommand:
    cmd = T(type=T.FLOW)
    cmd.flow.consumer_id = consumer_id
    cmd.flow.messagePermits = permits
    return cmd


def message(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int = 0,
    ack_set: Sequence[int] | None = None,
) -> pb.BaseCommand:
    """MESSAGE command (the stored entry follows it in the frame)."""
    cmd = T(type=T.MESSAGE)
    m = cmd.message
    m.consumer_id = consumer_id
    mid = m.message_id
    mid.ledgerId = unsigned(ledger_id)
    mid.entryId = unsigned(entry_id)
    mid.partition = partition
    if redelivery_count:
        m.redelivery_count = redelivery_count
    if ack_set:
        m.ack_set.extend(ack_set)
    return cmd


def ack(
    consumer_id: int,
    message_ids: Iterable[pb.MessageIdData],
    ack_type: int = pb.CommandAck.Individual,
    *,
    validation_error: int | None = None,
    txnid: tuple[int, int] | None = None,
    request_id: int | None = None,
) -> pb.BaseCommand:
    cmd = T(type=T.ACK)
    a = cmd.ack
    a.consumer_id = consumer_id
    a.ack_type = ack_type  # type: ignore[assignment]
    a.message_id.extend(message_ids)
    if validation_error is not None:
        a.validation_error = validation_error  # type: ignore[assignment]
    _set_txn(a, txnid)
    if request_id is not None:
        a.request_id = request_id
    return cmd


def ack_response(
    consumer_id: int,
    request_id: int,
    *,
    code: int | None = None,
    message: str | None = None,
    txnid: tuple[int, int] | None = None,
) -> pb.BaseCommand:
    cmd = T(type=T.ACK_RESPONSE)
    r = cmd.ackResponse
    r.consumer_id = consumer_id
    r.request_id = request_id
    if code is not None:
        r.error = code  # type: ignore[assignment]
    if message is not None:
        r.message = message
    _set_txn(r, txnid)
    return cmd


def redeliver(consumer_id: int, message_ids: Iterable[pb.MessageIdData] = ()) -> pb.BaseCommand:
    """REDELIVER_UNACKNOWLEDGED_MESSAGES; an empty list means everything unacked."""
    cmd = T(type=T.REDELIVER_UNACKNOWLEDGED_MESSAGES)
    r = cmd.redeliverUnacknowledgedMessages
    r.consumer_id = consumer_id
    r.message_ids.extend(message_ids)
    return cmd


def seek(
    consumer_id: int,
    request_id: int,
    *,
    message_id: pb.MessageIdData | None = None,
    publish_time_ms: int | None = None,
) -> pb.BaseCommand:
    """SEEK by id or by publish time: exactly one of the two."""
    if (message_id is None) == (publish_time_ms is None):
        raise ValueError("seek needs exactly one of message_id and publish_time_ms")
    cmd = T(type=T.SEEK)
    s = cmd.seek
    s.consumer_id = consumer_id
    s.request_id = request_id
    if message_id is not None:
        s.message_id.CopyFrom(message_id)
    else:
        s.message_publish_time = publish_time_ms  # type: ignore[assignment]
    return cmd


def unsubscribe(consumer_id: int, request_id: int) -> pb.BaseCommand:
    cmd = T(type=T.UNSUBSCRIBE)
    cmd.unsubscribe.consumer_id = consumer_id
    cmd.unsubscribe.request_id = request_id
    return cmd


def close_consumer(consumer_id: int, request_id: int, *, assigned_broker_url: str | None = None) -> pb.BaseCommand:
    cmd = T(type=T.CLOSE_CONSUMER)
    c = cmd.close_consumer
    c.consumer_id = consumer_id
    c.request_id = unsigned(request_id)
    if assigned_broker_url is not None:
        c.assignedBrokerServiceUrl = assigned_broker_url
    return cmd


def active_consumer_change(consumer_id: int, is_active: bool) -> pb.BaseCommand:
    cmd = T(type=T.ACTIVE_CONSUMER_CHANGE)
    cmd.active_consumer_change.consumer_id = consumer_id
    cmd.active_consumer_change.is_active = is_active
    return cmd


def get_last_message_id(consumer_id: int, request_id: int) -> pb.BaseCommand:
    cmd = T(type=T.GET_LAST_MESSAGE_ID)
    cmd.getLastMessageId.consumer_id = consumer_id
    cmd.getLastMessageId.request_id = request_id
    return cmd


def get_last_message_id_response(
    request_id: int,
    last_message_id: pb.MessageIdData,
    consumer_mark_delete_position: pb.MessageIdData | None = None,
) -> pb.BaseCommand:
    cmd = T(type=T.GET_LAST_MESSAGE_ID_RESPONSE)
    r = cmd.getLastMessageIdResponse
    r.request_id = request_id
    r.last_message_id.CopyFrom(last_message_id)
    if consumer_mark_delete_position is not None:
        r.consumer_mark_delete_position.CopyFrom(consumer_mark_delete_position)
    return cmd
