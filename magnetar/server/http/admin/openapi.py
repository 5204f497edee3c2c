"""The OpenAPI 3.0 document of the admin API, written from the route table, plus the JSON schemas of
Pulsar's admin objects (only the fields tools read are required; the rest may be added freely).
"""

from __future__ import annotations

import re
from typing import Any

from magnetar import __version__
from magnetar.server.http.routes import ERROR_STATUSES, Route, Schema

_INT = {"type": "integer"}
_NUM = {"type": "number"}
STRING_LIST: Schema = {"type": "array", "items": {"type": "string"}}
ERROR: Schema = {"type": "object", "required": ["reason"], "properties": {"reason": {"type": "string"}}}
TENANT_INFO: Schema = {
    "type": "object",
    "properties": {"adminRoles": STRING_LIST, "allowedClusters": STRING_LIST},
}
CLUSTER: Schema = {
    "type": "object",
    "properties": {k: {"type": "string"} for k in (
        "serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls", "proxyServiceUrl", "proxyProtocol",
        "authenticationPlugin", "authenticationParameters", "brokerClientTrustCertsFilePath", "listenerName")},
}
RETENTION: Schema = {
    "type": "object",
    "properties": {"retentionTimeInMinutes": {**_INT, "minimum": -1}, "retentionSizeInMB": {**_INT, "minimum": -1}},
}
AUTO_TOPIC_CREATION: Schema = {
    "type": "object",
    "required": ["allowAutoTopicCreation"],
    "properties": {
        "allowAutoTopicCreation": {"type": "boolean"},
        "topicType": {"type": "string", "enum": ["partitioned", "non-partitioned"]},
        "defaultNumPartitions": {**_INT, "minimum": 1},
    },
}
POLICIES: Schema = {
    "type": "object",
    "properties": {
        "replication_clusters": STRING_LIST,
        "message_ttl_in_seconds": {**_INT, "nullable": True},
        "retention_policies": {**RETENTION, "nullable": True},
        "autoTopicCreationOverride": {**AUTO_TOPIC_CREATION, "nullable": True},
    },
}
MESSAGE_ID: Schema = {
    "type": "object",
    "required": ["ledgerId", "entryId"],
    "properties": {"ledgerId": _INT, "entryId": _INT, "partitionIndex": _INT, "batchIndex": _INT,
                   "isExcluded": {"type": "boolean"}},
}
LONG_RUNNING_STATUS: Schema = {
    "type": "object",
    "required": ["status", "lastError"],
    "properties": {"status": {"type": "string", "enum": ["NOT_RUN", "RUNNING", "SUCCESS", "ERROR"]},
                   "lastError": {"type": "string"}},
}
PARTITIONS: Schema = {"type": "object", "required": ["partitions"], "properties": {"partitions": _INT}}
OFFLOAD_STATUS: Schema = {
    "type": "object",
    "required": ["status", "lastError", "firstUnoffloadedMessage"],
    "properties": {"status": {"type": "string", "enum": ["NOT_RUN", "RUNNING", "SUCCESS", "ERROR"]},
                   "lastError": {"type": "string"}, "firstUnoffloadedMessage": MESSAGE_ID,
                   "offloadReadErrors": _INT, "offloadReadError": {"type": "string"},
                   "lastOffloadReadErrorTimeStamp": _INT},
}
SUBSCRIPTION_STATS: Schema = {
    "type": "object",
    "required": ["msgBacklog", "msgOutCounter", "type", "consumers", "isDurable", "unackedMessages"],
    "properties": {"msgBacklog": _INT, "msgOutCounter": _INT, "type": {"type": "string"},
                   "consumers": {"type": "array"}, "isDurable": {"type": "boolean"}},
}
TOPIC_STATS: Schema = {
    "type": "object",
    "required": ["msgRateIn", "msgRateOut", "msgInCounter", "msgOutCounter", "bytesInCounter", "storageSize",
                 "publishers", "subscriptions", "waitingPublishers", "topicEpoch"],
    "properties": {
        "msgRateIn": _NUM, "msgRateOut": _NUM, "msgInCounter": _INT, "msgOutCounter": _INT,
        "bytesInCounter": _INT, "storageSize": _INT, "waitingPublishers": _INT,
        "topicEpoch": {**_INT, "nullable": True},
        "publishers": {"type": "array", "items": {"type": "object", "required": ["accessMode", "producerName"]}},
        "subscriptions": {"type": "object", "additionalProperties": SUBSCRIPTION_STATS},
    },
}
PARTITIONED_STATS: Schema = {
    "type": "object",
    "required": [*TOPIC_STATS["required"], "metadata", "partitions"],
    "properties": {**TOPIC_STATS["properties"], "metadata": PARTITIONS, "partitions": {"type": "object"}},
}
INTERNAL_STATS: Schema = {
    "type": "object",
    "required": ["entriesAddedCounter", "numberOfEntries", "totalSize", "lastConfirmedEntry", "state", "ledgers",
                 "cursors", "properties"],
    "properties": {
        "entriesAddedCounter": _INT, "numberOfEntries": _INT, "totalSize": _INT,
        "lastConfirmedEntry": {"type": "string"}, "state": {"type": "string"},
        "ledgers": {"type": "array", "items": {"type": "object", "required": ["ledgerId", "entries", "size"]}},
        "cursors": {"type": "object"},
        "properties": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
PARTITIONED_INTERNAL_STATS: Schema = {
    "type": "object",
    "required": ["metadata", "partitions"],
    "properties": {"metadata": PARTITIONS, "partitions": {"type": "object", "additionalProperties": INTERNAL_STATS}},
}

_INT_PARAMS = {"n", "timestamp", "expireTimeInSeconds", "messagePosition", "ledgerId"}
_TEXT = {"type": "string", "minLength": 1}
_SEGMENT = {"type": "string", "pattern": r"^[A-Za-z0-9_\-=:.]+$"}
_SEGMENTS = {"tenant": _SEGMENT, "namespace": _SEGMENT, "cluster": _SEGMENT}
_PARAM = re.compile(r"{(\w+)}")


def _operation(route: Route) -> dict[str, Any]:
    params: list[dict[str, Any]] = []
    for name in _PARAM.findall(route.path):
        schema = {"type": "integer", "minimum": 0} if name in _INT_PARAMS else dict(_SEGMENTS.get(name, _TEXT))
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    for name, schema in route.query.items():
        params.append({"name": name, "in": "query", "required": False, "schema": schema})
    responses: dict[str, Any] = {}
    if route.result is not None:
        responses[str(route.ok)] = {"description": "OK", "content": {route.result_type: {"schema": route.result}}}
    else:
        responses[str(route.ok)] = {"description": "Done"}
    for status in ERROR_STATUSES:
        responses[str(status)] = {"description": "Refused", "content": {"application/json": {"schema": ERROR}}}
    op: dict[str, Any] = {
        "summary": route.summary,
        "tags": [route.tag],
        "operationId": f"{route.method.lower()}_{re.sub(r'[^A-Za-z0-9]+', '_', route.path).strip('_')}",
        "parameters": params,
        "responses": responses,
    }
    if route.body is not None:
        op["requestBody"] = {
            "required": route.body_required,
            "content": {"application/json": {"schema": route.body}},
        }
    return op


def openapi_document(routes: list[Route]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "magnetar admin API",
            "version": __version__,
            "description": "Apache Pulsar's /admin/v2 REST API, as served by magnetar.",
        },
        "paths": paths,
    }
