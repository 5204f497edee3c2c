"""Discovery commands: PARTITIONED_METADATA, LOOKUP, GET_TOPICS_OF_NAMESPACE (GET_SCHEMA is in ``schema``).

LOOKUP is answered by :mod:`magnetar.broker.cluster.lookup` (the one answer the HTTP lookup gives too); this
handler says how the client reached the broker: its URLs spelled as the client reached them when possible
(a different spelling makes the client open a second connection, facts §2.7).
"""

from __future__ import annotations

import ipaddress
import logging

from magnetar import protocol as proto
from magnetar.broker.cluster.ownership import BrokerUrls
from magnetar.broker.errors import BrokerError
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.server.binary.session import Handler, Session

T = proto.pb.BaseCommand
log = logging.getLogger("magnetar.server.lookup")


def broker_url(conn: Session) -> str:
    return f"pulsar://{broker_host(conn)}:{conn.local_address[1]}"


def broker_host(conn: Session) -> str:
    host = conn.local_address[0]
    advertised = conn.broker.config.advertised_address
    if advertised:
        host = advertised
    else:
        try:
            if ipaddress.ip_address(host).is_loopback:
                host = "localhost"
        except ValueError:
            pass
        if ":" in host:
            host = f"[{host}]"
    return host


async def on_partitioned_metadata(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.partitionMetadata
    try:
        topic = TopicName.parse(req.topic)
        await conn.auth.require_lookup(topic, "Get Partition Metadata")
        meta = await conn.broker.catalog.partitioned_metadata(topic)
    except BrokerError as exc:
        failure = proto.commands.partitioned_metadata_failure(req.request_id, exc.server_error, str(exc))
        conn.send_frame(proto.encode_command(failure))
        return
    conn.send_frame(proto.encode_command(proto.commands.partitioned_metadata_response(req.request_id, meta.partitions)))


async def on_lookup(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.lookupTopic
    try:
        topic = TopicName.parse(req.topic)
        await conn.auth.require_lookup(topic)
        url, tls_url = conn.auth.lookup_urls(broker_host(conn), conn.local_address[1])
        answer = await conn.broker.lookup.answer(topic, BrokerUrls(url, tls_url), req.advertised_listener_name,
                                                 authoritative=req.authoritative)
    except BrokerError as exc:
        code = exc.server_error if exc.server_error else proto.ServerErrorCode.TopicNotFound
        conn.send_frame(proto.encode_command(proto.commands.lookup_failure(req.request_id, code, str(exc))))
        return
    urls = answer.urls
    conn.send_frame(proto.encode_command(proto.commands.lookup_response(
        req.request_id, urls.pulsar or "", answer.authoritative, broker_url_tls=urls.pulsar_tls,
        redirect=answer.redirect)))


async def on_get_topics(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    req = cmd.getTopicsOfNamespace
    ns = NamespaceName.parse(req.namespace)
    await conn.auth.require_namespace(ns)
    mode = req.mode if req.HasField("mode") else 0
    topics = [] if mode == 1 else await conn.broker.catalog.list_topics(ns)
    log.debug("GET_TOPICS_OF_NAMESPACE %s mode=%s from %s: %d topics", ns, mode, conn.remote_address, len(topics))
    conn.send_frame(proto.encode_command(proto.commands.get_topics_of_namespace_response(req.request_id, topics)))


HANDLERS: dict[int, Handler] = {
    T.PARTITIONED_METADATA: on_partitioned_metadata,
    T.LOOKUP: on_lookup,
    T.GET_TOPICS_OF_NAMESPACE: on_get_topics,
}
