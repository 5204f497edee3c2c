"""Admin routes for persistent topics and their subscriptions (Pulsar's ``PersistentTopics`` resource).

``/admin/v2/persistent/{tenant}/{namespace}/{topic}/...``: the topic's local name arrives URL-encoded.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from magnetar.broker.admin.broker_admin import BrokerAdmin, parse_namespace, parse_topic
from magnetar.broker.admin.stats import (
    RateTracker,
    internal_stats,
    partitioned_stats,
    topic_stats,
    unwritten_internal_stats,
    unwritten_topic_stats,
)
from magnetar.broker.admin.subscriptions import SubscriptionAdmin, parse_message_id
from magnetar.broker.compaction import CompactedTopic, CompactionService, compacted_of, status_json
from magnetar.broker.compaction.view import CompactionRecord
from magnetar.broker.errors import NotAllowed
from magnetar.broker.names import TopicName, is_system_topic
from magnetar.broker.registry.catalog import PARTITIONS_MAX
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.ledger.api import Position
from magnetar.server.http.admin import openapi as s
from magnetar.server.http.routes import Route, flag, int_value, json_body, match, no_content, ok

BASE = "/admin/v2/persistent/{tenant}/{namespace}"
TOPIC = BASE + "/{topic}"
SUB = TOPIC + "/subscription/{subName}"
FORCE = {"force": {"type": "boolean"}}


def _service(admin: BrokerAdmin) -> CompactionService:
    if admin.broker.compaction is None:
        raise NotAllowed("This broker has no store for compacted ledgers")
    return admin.broker.compaction


def _compacted(topic: PersistentTopic) -> CompactedTopic:
    compacted = compacted_of(topic.compacted)
    if compacted is None:
        raise NotAllowed("This broker has no store for compacted ledgers")
    return compacted


def _topic(req: web.Request) -> TopicName:
    return parse_topic("persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))


def topic_routes(admin: BrokerAdmin, rates: RateTracker) -> list[Route]:
    def listed(req: web.Request, names: list[str]) -> list[str]:
        """Pulsar's lists leave the broker's system topics out unless ``includeSystemTopic=true``."""
        return names if flag(req, "includeSystemTopic") else [n for n in names if not is_system_topic(n)]

    async def list_topics(req: web.Request) -> web.Response:
        return ok(listed(req, await admin.topics(parse_namespace(match(req, "tenant"), match(req, "namespace")))))

    async def list_partitioned(req: web.Request) -> web.Response:
        ns = parse_namespace(match(req, "tenant"), match(req, "namespace"))
        return ok(listed(req, await admin.partitioned_topics(ns)))

    async def create(req: web.Request) -> web.Response:
        await admin.create_topic(_topic(req))
        return no_content()

    async def delete(req: web.Request) -> web.Response:
        await admin.delete_topic(_topic(req), force=flag(req, "force"))
        return no_content()

    async def create_partitioned(req: web.Request) -> web.Response:
        count = int_value(await json_body(req, required=True), "partitions", 0)
        await admin.create_partitioned_topic(_topic(req), count)
        return no_content()

    async def update_partitions(req: web.Request) -> web.Response:
        count = int_value(await json_body(req, required=True), "partitions", 0)
        await admin.update_partitions(_topic(req), count)
        return no_content()

    async def get_partitions(req: web.Request) -> web.Response:
        topic = _topic(req)
        await admin.targets(topic)  # 404 for an unknown namespace
        if flag(req, "checkAllowAutoCreation"):  # an http:// client's partitioned-metadata lookup
            return ok({"partitions": (await admin.catalog.partitioned_metadata(topic)).partitions})
        return ok({"partitions": await admin.partitions(topic)})

    async def delete_partitioned(req: web.Request) -> web.Response:
        await admin.delete_partitioned_topic(_topic(req), force=flag(req, "force"))
        return no_content()

    async def stats_of(topic: TopicName, owner: str) -> dict[str, Any]:
        viewed = await admin.view(topic)  # GETs create nothing: a partition never written shows zeros
        if viewed is None:
            return unwritten_topic_stats(dedup_enabled=await admin.broker.policies.dedup_enabled(topic), owner=owner)
        return topic_stats(viewed, rates, owner=owner)

    async def internal_of(topic: TopicName) -> dict[str, Any]:
        viewed = await admin.view(topic)
        return unwritten_internal_stats() if viewed is None else internal_stats(viewed)

    async def stats(req: web.Request) -> web.Response:
        return ok(await stats_of(_topic(req), req.host))

    async def internal(req: web.Request) -> web.Response:
        return ok(await internal_of(_topic(req)))

    async def p_stats(req: web.Request) -> web.Response:
        names = await admin.partition_names(_topic(req))
        parts = {str(n): await stats_of(n, req.host) for n in names}
        return ok(partitioned_stats(parts, len(names), per_partition=flag(req, "perPartition")))

    async def p_internal(req: web.Request) -> web.Response:
        names = await admin.partition_names(_topic(req))
        parts = {str(n): await internal_of(n) for n in names}
        return ok({"metadata": {"partitions": len(names)}, "partitions": parts})

    async def last_message_id(req: web.Request) -> web.Response:
        return ok(await admin.last_message_id(_topic(req)))

    async def unload(req: web.Request) -> web.Response:
        await admin.unload(_topic(req))
        return no_content()

    async def terminate(req: web.Request) -> web.Response:
        return ok(await admin.terminate(_topic(req)))

    async def offload(req: web.Request) -> web.Response:
        until, _ = parse_message_id(await json_body(req, required=True))
        topic = await admin.load(_topic(req))
        await admin.broker.offload.trigger(topic.ledger, until or Position(2**63 - 1, 2**63 - 1))
        return no_content()

    async def offload_status(req: web.Request) -> web.Response:
        viewed = await admin.view(_topic(req))
        return ok(admin.broker.offload.status(viewed.ledger if viewed is not None else None))

    async def compact(req: web.Request) -> web.Response:
        for name in await admin.targets(_topic(req)):
            _service(admin).trigger(_compacted(await admin.load(name)))
        return no_content()

    async def compaction_status(req: web.Request) -> web.Response:
        viewed = await admin.view(_topic(req))
        return ok(status_json(_compacted(viewed).record if viewed is not None else CompactionRecord()))

    return [
        Route("GET", BASE, list_topics, "List the namespace's topics", "topics", result=s.STRING_LIST,
              query={"includeSystemTopic": {"type": "boolean"}}),
        Route("GET", BASE + "/partitioned", list_partitioned, "List partitioned topics", "topics",
              result=s.STRING_LIST),
        Route("PUT", TOPIC, create, "Create a non-partitioned topic", "topics", ok=204),
        Route("DELETE", TOPIC, delete, "Delete a topic", "topics", ok=204, query=FORCE),
        Route("PUT", TOPIC + "/partitions", create_partitioned, "Create a partitioned topic", "topics", ok=204,
              body={"type": "integer", "minimum": 1, "maximum": PARTITIONS_MAX}, body_required=True),
        Route("POST", TOPIC + "/partitions", update_partitions, "Increase the partitions", "topics", ok=204,
              body={"type": "integer", "minimum": 1, "maximum": PARTITIONS_MAX}, body_required=True),
        Route("GET", TOPIC + "/partitions", get_partitions, "Partition count", "topics", result=s.PARTITIONS),
        Route("DELETE", TOPIC + "/partitions", delete_partitioned, "Delete a partitioned topic", "topics", ok=204,
              query=FORCE),
        Route("GET", TOPIC + "/stats", stats, "Topic stats", "topics", result=s.TOPIC_STATS),
        Route("GET", TOPIC + "/internalStats", internal, "Internal stats", "topics", result=s.INTERNAL_STATS),
        Route("GET", TOPIC + "/partitioned-stats", p_stats, "Partitioned topic stats", "topics",
              result=s.PARTITIONED_STATS, query={"perPartition": {"type": "boolean"}}),
        Route("GET", TOPIC + "/partitioned-internalStats", p_internal, "Partitioned internal stats", "topics",
              result=s.PARTITIONED_INTERNAL_STATS),
        Route("GET", TOPIC + "/lastMessageId", last_message_id, "Last message id", "topics", result=s.MESSAGE_ID),
        Route("PUT", TOPIC + "/unload", unload, "Unload a topic", "topics", ok=204),
        Route("POST", TOPIC + "/terminate", terminate, "Terminate a topic", "topics", result=s.MESSAGE_ID),
        Route("PUT", TOPIC + "/offload", offload, "Offload the sealed ledgers before a message id", "topics",
              ok=204, body=s.MESSAGE_ID, body_required=True),
        Route("GET", TOPIC + "/offload", offload_status, "Status of the last offload", "topics",
              result=s.OFFLOAD_STATUS),
        Route("PUT", TOPIC + "/compaction", compact, "Start compacting the topic", "topics", ok=204),
        Route("GET", TOPIC + "/compaction", compaction_status, "Status of the topic's compaction", "topics",
              result=s.LONG_RUNNING_STATUS),
        *subscription_routes(SubscriptionAdmin(admin)),
    ]


def subscription_routes(subs: SubscriptionAdmin) -> list[Route]:
    async def list_subs(req: web.Request) -> web.Response:
        return ok(await subs.list(_topic(req)))

    async def create(req: web.Request) -> web.Response:
        body = await json_body(req, required=False)
        await subs.create(_topic(req), match(req, "subName"), body, replicated=flag(req, "replicated"))
        return no_content()

    async def set_replicated(req: web.Request) -> web.Response:
        await subs.set_replicated(_topic(req), match(req, "subName"), await json_body(req, required=True))
        return no_content()

    async def get_replicated(req: web.Request) -> web.Response:
        return ok(await subs.get_replicated(_topic(req), match(req, "subName")))

    async def delete(req: web.Request) -> web.Response:
        await subs.delete(_topic(req), match(req, "subName"), force=flag(req, "force"))
        return no_content()

    async def skip_all(req: web.Request) -> web.Response:
        await subs.skip_all(_topic(req), match(req, "subName"))
        return no_content()

    async def skip(req: web.Request) -> web.Response:
        await subs.skip(_topic(req), match(req, "subName"), int_value(match(req, "n"), "n"))
        return no_content()

    async def reset_time(req: web.Request) -> web.Response:
        timestamp = int_value(match(req, "timestamp"), "timestamp")
        await subs.reset_to_time(_topic(req), match(req, "subName"), timestamp)
        return no_content()

    async def reset_id(req: web.Request) -> web.Response:
        await subs.reset_to_id(_topic(req), match(req, "subName"), await json_body(req, required=True))
        return no_content()

    async def expire(req: web.Request) -> web.Response:
        seconds = int_value(match(req, "expireTimeInSeconds"), "expireTimeInSeconds")
        await subs.expire(_topic(req), match(req, "subName"), seconds, subs.admin.broker.clock.now_ms())
        return no_content()

    async def peek(req: web.Request) -> web.Response:
        nth = int_value(match(req, "messagePosition"), "messagePosition", 1)
        peeked = await subs.peek(_topic(req), match(req, "subName"), nth)
        return web.Response(body=peeked.payload, headers=peek_headers(peeked.position, peeked.metadata),
                            content_type="application/octet-stream")

    message_id = {**s.MESSAGE_ID, "nullable": True}
    return [
        Route("GET", TOPIC + "/subscriptions", list_subs, "List subscriptions", "subscriptions",
              result=s.STRING_LIST),
        Route("PUT", SUB, create, "Create a subscription at a position (default latest)", "subscriptions", ok=204,
              body=message_id, query={"replicated": {"type": "boolean"}}),
        Route("DELETE", SUB, delete, "Delete a subscription", "subscriptions", ok=204, query=FORCE),
        Route("POST", SUB + "/replicatedSubscriptionStatus", set_replicated,
              "Turn a subscription's replicated state (PIP-33) on or off", "subscriptions", ok=204,
              body={"type": "boolean"}, body_required=True),
        Route("GET", SUB + "/replicatedSubscriptionStatus", get_replicated,
              "Whether the subscription (each partition's) is replicated", "subscriptions",
              result={"type": "object", "additionalProperties": {"type": "boolean"}}),
        Route("POST", SUB + "/skip_all", skip_all, "Clear the backlog", "subscriptions", ok=204),
        Route("POST", SUB + "/skip/{n}", skip, "Skip n messages", "subscriptions", ok=204),
        Route("POST", SUB + "/resetcursor/{timestamp}", reset_time, "Reset the cursor to a publish time",
              "subscriptions", ok=204),
        Route("POST", SUB + "/resetcursor", reset_id, "Reset the cursor to a message id", "subscriptions", ok=204,
              body=s.MESSAGE_ID, body_required=True),
        Route("POST", SUB + "/expireMessages/{expireTimeInSeconds}", expire, "Expire older messages",
              "subscriptions", ok=204),
        Route("GET", SUB + "/position/{messagePosition}", peek, "Peek the nth unacknowledged message",
              "subscriptions", result={"type": "string", "format": "binary"}, result_type="application/octet-stream"),
    ]


def peek_headers(position: Any, meta: Any) -> dict[str, str]:
    headers = {
        "X-Pulsar-Message-ID": f"{position.ledger_id}:{position.entry_id}",
        "X-Pulsar-publish-time": str(meta.publish_time),
        "X-Pulsar-producer-name": _printable(meta.producer_name),
        "X-Pulsar-sequence-id": str(meta.sequence_id),
    }
    if meta.HasField("num_messages_in_batch"):
        headers["X-Pulsar-num-batch-message"] = str(meta.num_messages_in_batch)
        headers["X-Pulsar-batch-size"] = str(meta.num_messages_in_batch)
    if meta.HasField("partition_key"):
        headers["X-Pulsar-Key"] = _printable(meta.partition_key)
    if meta.compression:
        headers["X-Pulsar-compression"] = str(meta.compression)
    for kv in list(meta.properties)[:100]:
        name = "".join(ch for ch in kv.key if ch.isalnum() or ch in "-_")
        if name:
            headers[f"X-Pulsar-PROPERTY-{name}"] = _printable(kv.value)
    return headers



def _printable(text: str | bytes) -> str:
    """Header values must be printable ASCII: anything else is dropped rather than failing the reply (a text
    field stored before SENDs were checked for UTF-8 comes back as bytes)."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "".join(ch for ch in text if 0x20 <= ord(ch) < 0x7F)[:4096]
