"""Admin routes for deduplication and backlog-quota policies (namespace and topic level), topic-level
retention and TTL, namespace unload, and reading one message (``examinemessage``, by ledger and entry).
Paths and bodies are Pulsar's. A deduplication change unloads the loaded topics it applies to, so they
reload with it (clients reconnect, as after ``unload``)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from magnetar import protocol as proto
from magnetar.broker.admin.broker_admin import BrokerAdmin, parse_namespace, parse_topic
from magnetar.broker.admin.policy_values import POLICY_SETTERS
from magnetar.broker.admin.subscriptions import read_for_admin
from magnetar.broker.errors import InvalidRequest, NotFound
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.broker.policies import BacklogQuota
from magnetar.broker.policies.store import DESTINATION_STORAGE, QUOTA_TYPES
from magnetar.broker.topic.persistent import PersistentTopic
from magnetar.ledger.api import Entry, Position
from magnetar.server.http.admin.topics import peek_headers
from magnetar.server.http.routes import Route, int_value, json_body, match, no_content, ok

NS = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
_ANY: dict[str, Any] = {}
#: topic policy sub-resource -> (TopicPolicies field, how a body is checked)
TOPIC_POLICIES = {  # the checks are the namespace policies' own
    "deduplicationEnabled": ("deduplicationEnabled", POLICY_SETTERS["deduplicationEnabled"]),
    "retention": ("retentionPolicies", POLICY_SETTERS["retention_policies"]),
    "messageTTL": ("messageTTLInSeconds", POLICY_SETTERS["message_ttl_in_seconds"]),
}


def _ns(req: web.Request) -> NamespaceName:
    return parse_namespace(match(req, "tenant"), match(req, "namespace"))


def _topic(req: web.Request) -> TopicName:
    return parse_topic("persistent", match(req, "tenant"), match(req, "namespace"), match(req, "topic"))


def _quota_body(current: Any, body: Any, req: web.Request) -> dict[str, Any]:
    """The quota map with the ``backlogQuotaType`` (destination_storage or message_age) entry set."""
    kind = req.query.get("backlogQuotaType", DESTINATION_STORAGE)
    if kind not in QUOTA_TYPES:
        raise InvalidRequest(f"backlogQuotaType must be one of {', '.join(QUOTA_TYPES)}")
    return {**(current if isinstance(current, dict) else {}), kind: BacklogQuota.parse(body).rest()}


async def unload_namespace(admin: BrokerAdmin, ns: NamespaceName) -> None:
    for name in [t for t in list(admin.registry.loaded) if TopicName.parse(t).namespace_name == ns]:
        await admin.unload(TopicName.parse(name))


async def _unload_if_loaded(admin: BrokerAdmin, topic: TopicName) -> None:
    names = await admin.partition_names(topic) if await admin.partitions(topic) > 0 else [topic]
    for name in names:
        if str(name) in admin.registry.loaded:
            await admin.unload(name)


def namespace_policy_routes(admin: BrokerAdmin) -> list[Route]:
    async def get_dedup(req: web.Request) -> web.Response:
        return ok(await admin.policy(_ns(req), "deduplicationEnabled"))

    def set_dedup(value: bool | None) -> Any:
        async def handler(req: web.Request) -> web.Response:
            body = await json_body(req, required=True) if value is None else None
            await admin.set_policy(_ns(req), "deduplicationEnabled", body if value is None else None)
            await unload_namespace(admin, _ns(req))
            return no_content()
        return handler

    async def get_encryption(req: web.Request) -> web.Response:
        return ok(bool(await admin.policy(_ns(req), "encryption_required")))

    async def set_encryption(req: web.Request) -> web.Response:
        await admin.set_policy(_ns(req), "encryption_required", await json_body(req, required=True))
        return no_content()

    async def get_quotas(req: web.Request) -> web.Response:
        return ok(await admin.policy(_ns(req), "backlog_quota_map") or {})

    async def set_quota(req: web.Request) -> web.Response:
        current = await admin.policy(_ns(req), "backlog_quota_map")
        body = _quota_body(current, await json_body(req, required=True), req)
        await admin.set_policy(_ns(req), "backlog_quota_map", body)
        return no_content()

    async def remove_quota(req: web.Request) -> web.Response:
        await admin.set_policy(_ns(req), "backlog_quota_map", None)
        return no_content()

    return [
        Route("GET", NS + "/deduplication", get_dedup, "Get the namespace's deduplication", "namespaces",
              result={"type": "boolean", "nullable": True}),
        Route("POST", NS + "/deduplication", set_dedup(None), "Enable or disable deduplication", "namespaces",
              ok=204, body={"type": "boolean"}, body_required=True),
        Route("DELETE", NS + "/deduplication", set_dedup(False), "Remove the deduplication policy", "namespaces",
              ok=204),
        # stored and answered as Pulsar's; the broker does not refuse unencrypted messages (docs/guide/security.md)
        Route("GET", NS + "/encryptionRequired", get_encryption, "Get the namespace's encryptionRequired",
              "namespaces", result={"type": "boolean"}),
        Route("POST", NS + "/encryptionRequired", set_encryption, "Set the namespace's encryptionRequired",
              "namespaces", ok=204, body={"type": "boolean"}, body_required=True),
        Route("GET", NS + "/backlogQuotaMap", get_quotas, "Get the backlog quotas", "namespaces", result=_ANY),
        Route("POST", NS + "/backlogQuota", set_quota, "Set a backlog quota", "namespaces", ok=204, body=_ANY,
              body_required=True, query={"backlogQuotaType": {"type": "string"}}),
        Route("DELETE", NS + "/backlogQuota", remove_quota, "Remove the backlog quota", "namespaces", ok=204),
    ]


def topic_policy_routes(admin: BrokerAdmin) -> list[Route]:
    store = admin.broker.policies.store

    def resource(suffix: str, field: str, check: Any) -> list[Route]:
        async def get(req: web.Request) -> web.Response:
            return ok((await store.get(_topic(req))).get(field))

        async def set_(req: web.Request) -> web.Response:
            topic = _topic(req)
            await admin.targets(topic)
            raw = req.query.get("messageTTL") if suffix == "messageTTL" else None
            body = int_value(raw, "messageTTL") if raw is not None else await json_body(req, required=True)
            await store.set(topic, field, check(body))
            if suffix == "deduplicationEnabled":
                await _unload_if_loaded(admin, topic)
            return no_content()

        async def remove(req: web.Request) -> web.Response:
            await store.set(_topic(req), field, None)
            if suffix == "deduplicationEnabled":
                await _unload_if_loaded(admin, _topic(req))
            return no_content()

        path = f"{TOPIC}/{suffix}"
        return [Route("GET", path, get, f"Get the topic's {suffix}", "topics", result=_ANY),
                Route("POST", path, set_, f"Set the topic's {suffix}", "topics", ok=204, body=_ANY),
                Route("DELETE", path, remove, f"Remove the topic's {suffix}", "topics", ok=204)]

    async def get_quotas(req: web.Request) -> web.Response:
        return ok((await store.get(_topic(req))).get("backLogQuotaMap") or {})

    async def set_quota(req: web.Request) -> web.Response:
        await admin.targets(_topic(req))
        current = (await store.get(_topic(req))).get("backLogQuotaMap")
        await store.set(_topic(req), "backLogQuotaMap", _quota_body(current, await json_body(req, required=True), req))
        return no_content()

    async def remove_quota(req: web.Request) -> web.Response:
        await store.set(_topic(req), "backLogQuotaMap", None)
        return no_content()

    routes = [r for suffix, (field, check) in TOPIC_POLICIES.items() for r in resource(suffix, field, check)]
    return [
        *routes,
        Route("GET", TOPIC + "/backlogQuotaMap", get_quotas, "Get the topic's backlog quotas", "topics", result=_ANY),
        Route("POST", TOPIC + "/backlogQuota", set_quota, "Set the topic's backlog quota", "topics", ok=204,
              body=_ANY, body_required=True),
        Route("DELETE", TOPIC + "/backlogQuota", remove_quota, "Remove the topic's backlog quota", "topics", ok=204),
        *message_routes(admin),
    ]


def nth_position(ledger: Any, nth: int, *, from_latest: bool) -> Position:
    """The nth (from 1) stored entry counted from the first or from the last, over the ledgers' entry counts."""
    summaries = [x for x in ledger.ledgers() if x.entries > 0]
    for summary in reversed(summaries) if from_latest else summaries:
        if nth <= summary.entries:
            return Position(summary.ledger_id, summary.entries - nth if from_latest else nth - 1)
        nth -= summary.entries
    raise NotFound("Message not found")


MARKERS_SKIPPED_MAX = 10_000  # marker entries examinemessage steps over before it answers 404


async def nth_message(ledger: Any, nth: int, *, from_latest: bool) -> Entry:
    """The nth (from 1) stored message counted from the first or from the last entry: marker entries (the
    broker's own: PIP-33, transaction markers) are not messages and are not counted, as Pulsar skips them."""
    seen = 0
    for k in range(1, nth + MARKERS_SKIPPED_MAX + 1):
        entry = await read_for_admin(ledger, nth_position(ledger, k, from_latest=from_latest))
        if proto.parse_entry_metadata(entry.data).HasField("marker_type"):
            continue
        seen += 1
        if seen == nth:
            return entry
    raise NotFound("Message not found")


def message_routes(admin: BrokerAdmin) -> list[Route]:
    async def written(topic: TopicName) -> PersistentTopic:
        loaded = await admin.view(topic)  # reading creates nothing: a partition never written has no message
        if loaded is None:
            raise NotFound("Message not found")
        return loaded

    def reply(entry: Entry) -> web.Response:
        meta = proto.parse_entry_metadata(entry.data)
        return web.Response(body=bytes(proto.entry_payload(entry.data)), headers=peek_headers(entry.position, meta),
                            content_type="application/octet-stream")

    async def examine(req: web.Request) -> web.Response:
        topic = _topic(req)
        loaded = await written(topic)
        nth = int_value(req.query.get("messagePosition", "1"), "messagePosition", 1, 100_000)
        latest = req.query.get("initialPosition", "latest").lower() == "latest"
        return reply(await nth_message(loaded.ledger, nth, from_latest=latest))

    async def by_id(req: web.Request) -> web.Response:
        position = Position(int_value(match(req, "ledgerId"), "ledgerId"), int_value(match(req, "entryId"), "entryId"))
        return reply(await read_for_admin((await written(_topic(req))).ledger, position))

    return [
        Route("GET", TOPIC + "/examinemessage", examine, "Read the nth message from the earliest or latest",
              "topics", result=None, result_type="application/octet-stream",
              query={"initialPosition": {"type": "string"}, "messagePosition": {"type": "integer"}}),
        Route("GET", TOPIC + "/ledger/{ledgerId}/entry/{entryId}", by_id, "Read a message by its id", "topics",
              result=None, result_type="application/octet-stream"),
    ]
