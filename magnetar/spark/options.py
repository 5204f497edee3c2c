"""Parsing the user's ``.option(...)`` strings into typed, picklable settings for each side.

Owns the option names of ``specs/spark.md`` (case-insensitive, as Spark passes them), their defaults
and their validation; every error names the option. Knows nothing of Spark's classes or of the
broker: the result is plain frozen dataclasses that travel to executors inside input partitions.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "LedgerStoreLocation", "OptionError", "SinkOptions", "SourceOptions", "TopicSpec", "parse_sink", "parse_source",
]

_CLIENT_PREFIX: Final = "client."
_COMMON: Final = ("service.url", "serviceUrl", "path")
SOURCE_OPTIONS: Final = (
    *_COMMON, "admin.url", "topic", "topics", "topicsPattern", "startingOffsets", "endingOffsets", "startingTime",
    "endingTime", "failOnDataLoss", "maxRecordsPerTrigger", "maxEntriesPerTrigger", "maxBytesPerTrigger",
    "minPartitions", "subscriptionName", "pollTimeoutMs", "readFrom", "ledgerStore.url", "ledgerStore.endpoint",
    "ledgerStore.region",
)
SINK_OPTIONS: Final = (
    *_COMMON, "topic", "topics", "topicsPattern", "deliveryGuarantee", "batchingEnabled", "maxPendingMessages",
    "txnTimeoutMs", "sinkId", "checkpointLocation",
)
EXACTLY_ONCE: Final = "exactly_once"
AT_LEAST_ONCE: Final = "at_least_once"
GUARANTEES: Final = (EXACTLY_ONCE, AT_LEAST_ONCE)
READ_FROM: Final = ("broker", "storage")


class OptionError(ValueError):
    """A missing, conflicting or malformed option; the message names it."""


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """Exactly one of: a topic, a list of topics, or a regular expression over a namespace."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOptions:
    service_url: str
    admin_url: str | None
    topics: TopicSpec
    starting: str  # "earliest" | "latest" | JSON per partition
    ending: str  # "latest" | JSON per partition (batch only)
    starting_time_ms: int | None
    ending_time_ms: int | None
    fail_on_data_loss: bool
    max_records_per_trigger: int | None
    max_bytes_per_trigger: int | None
    min_partitions: int | None
    subscription_name: str | None
    poll_timeout_ms: int
    client_options: tuple[tuple[str, int], ...]
    read_from: str = "broker"  # "storage": sealed ledgers straight from the object store (``direct``)
    ledger_store: LedgerStoreLocation | None = None


@dataclass(frozen=True, slots=True)
class LedgerStoreLocation:
    """Where the broker keeps its ledgers (its ``ledgerStoreUrl``, ``...ServiceEndpoint``, ``...Region``);
    credentials are not options: each worker's AWS credential chain supplies them."""

    url: str  # s3://BUCKET[/PREFIX]
    endpoint: str = ""
    region: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkOptions:
    service_url: str
    topic: str | None
    delivery_guarantee: str | None  # None: exactly_once if the broker has transactions, else at_least_once
    batching: bool
    max_pending_messages: int
    client_options: tuple[tuple[str, int], ...]
    txn_timeout_ms: int = 600_000
    sink_id: str = "default"
    checkpoint_location: str | None = None


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _reject_unknown(opts: Iterable[str], known: tuple[str, ...]) -> None:
    """A misspelled option (``startingOffset``) is an error naming the closest known one, never ignored."""
    by_lower = {k.lower(): k for k in known}
    for key in sorted(opts):
        if key in by_lower or key.startswith(_CLIENT_PREFIX):
            continue
        close = difflib.get_close_matches(key, list(by_lower), n=1)
        hint = f"; did you mean {by_lower[close[0]]}?" if close else f"; known options: {', '.join(known)}"
        raise OptionError(f"unknown option {key!r}{hint}")


def _int(opts: Mapping[str, str], name: str, *, minimum: int = 0) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {raw!r}")


def _service_url(opts: Mapping[str, str]) -> str:
    url = opts.get("service.url") or opts.get("serviceurl")
    if not url:
        raise OptionError("option service.url is required (e.g. pulsar://localhost:6650)")
    if not url.startswith("pulsar://"):
        raise OptionError(f"option service.url must be a pulsar:// URL, got {url!r}")
    return url


def _client_options(opts: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
    """``client.operationTimeoutMs`` style integer settings handed to ``magnetar.client.Client``."""
    known = {"operationtimeoutms": "operation_timeout_ms", "connecttimeoutms": "connect_timeout_ms"}
    out = []
    for key, value in sorted(opts.items()):
        if key.startswith(_CLIENT_PREFIX):
            name = known.get(key[len(_CLIENT_PREFIX):])
            if name is None:
                raise OptionError(f"unknown client option {key}; known: {sorted(known)}")
            out.append((name, int(value)))
    return tuple(out)


def _topics(opts: Mapping[str, str]) -> TopicSpec:
    given = [name for name in ("topic", "topics", "topicspattern") if opts.get(name)]
    if len(given) != 1:
        raise OptionError(f"exactly one of topic, topics, topicsPattern is required, got {given or 'none'}")
    if given[0] == "topicspattern":
        return TopicSpec(pattern=opts["topicspattern"])
    names = tuple(t.strip() for t in opts[given[0]].split(",") if t.strip())
    if not names or (given[0] == "topic" and len(names) != 1):
        raise OptionError(f"option {given[0]} names no valid topic: {opts[given[0]]!r}")
    return TopicSpec(topics=names)


def _offsets(opts: Mapping[str, str], name: str, default: str, allowed: tuple[str, ...]) -> str:
    raw = opts.get(name.lower(), default).strip()
    if raw.lower() in allowed:
        return raw.lower()
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        raise OptionError(f"option {name} must be one of {allowed} or a JSON object, got {raw!r}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option {name} JSON must be an object of partition -> offset, got {raw!r}")
    return raw


def _ledger_store(opts: Mapping[str, str]) -> tuple[str, LedgerStoreLocation | None]:
    read_from = opts.get("readfrom", "broker").strip().lower()
    if read_from not in READ_FROM:
        raise OptionError(f"option readFrom must be one of {', '.join(READ_FROM)}, got {read_from!r}")
    url = opts.get("ledgerstore.url", "").strip()
    if read_from == "broker":
        return read_from, None
    if not url.startswith("s3://") or len(url) <= len("s3://"):
        raise OptionError("readFrom=storage needs option ledgerStore.url, the broker's ledgerStoreUrl "
                          f"(s3://BUCKET[/PREFIX]), got {url!r}")
    if not opts.get("admin.url"):
        raise OptionError("readFrom=storage needs option admin.url (the broker's web service, e.g. "
                          "http://localhost:8080): the driver asks it for each partition's ledgers")
    return read_from, LedgerStoreLocation(url, opts.get("ledgerstore.endpoint", "").strip(),
                                          opts.get("ledgerstore.region", "").strip())


def parse_source(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lower(options)
    _reject_unknown(opts, SOURCE_OPTIONS)
    max_records = _int(opts, "maxRecordsPerTrigger", minimum=1)
    if max_records is None:
        max_records = _int(opts, "maxEntriesPerTrigger", minimum=1)
    ending = _offsets(opts, "endingOffsets", "latest", ("latest",))
    if streaming and ("endingoffsets" in opts or "endingtime" in opts):
        raise OptionError("endingOffsets and endingTime are for batch reads only")
    if "startingoffsets" in opts and "startingtime" in opts:
        raise OptionError("give startingOffsets or startingTime, not both")
    read_from, ledger_store = _ledger_store(opts)
    if streaming and read_from == "storage":
        raise OptionError("readFrom=storage is for batch reads (a stream reads through the broker)")
    return SourceOptions(
        service_url=_service_url(opts),
        admin_url=opts.get("admin.url"),
        topics=_topics(opts),
        starting=_offsets(opts, "startingOffsets", "latest" if streaming else "earliest", ("earliest", "latest")),
        ending=ending,
        starting_time_ms=_int(opts, "startingTime"),
        ending_time_ms=_int(opts, "endingTime"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        max_records_per_trigger=max_records,
        max_bytes_per_trigger=_int(opts, "maxBytesPerTrigger", minimum=1),
        min_partitions=_int(opts, "minPartitions", minimum=1),
        subscription_name=opts.get("subscriptionname") or None,
        poll_timeout_ms=_int(opts, "pollTimeoutMs", minimum=1) or 30_000,
        client_options=_client_options(opts),
        read_from=read_from,
        ledger_store=ledger_store,
    )


def parse_sink(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    _reject_unknown(opts, SINK_OPTIONS)
    guarantee = opts.get("deliveryguarantee", "").strip().lower() or None
    if guarantee is not None and guarantee not in GUARANTEES:
        raise OptionError(f"option deliveryGuarantee must be one of {', '.join(GUARANTEES)}, got {guarantee!r}")
    sink_id = opts.get("sinkid", "default").strip()
    if not sink_id or not all(c.isalnum() or c in "-_." for c in sink_id) or sink_id.startswith("."):
        raise OptionError(f"option sinkId must be letters, digits, '-', '_' or '.', got {sink_id!r}")
    topic = opts.get("topic") or None
    if opts.get("topics") or opts.get("topicspattern"):
        raise OptionError("the sink takes option topic (or a topic column), not topics/topicsPattern")
    return SinkOptions(
        service_url=_service_url(opts),
        topic=topic,
        delivery_guarantee=guarantee,
        batching=_bool(opts, "batchingEnabled", True),
        max_pending_messages=_int(opts, "maxPendingMessages", minimum=1) or 10_000,
        client_options=_client_options(opts),
        txn_timeout_ms=_int(opts, "txnTimeoutMs", minimum=1) or 600_000,
        sink_id=sink_id,
        checkpoint_location=opts.get("checkpointlocation") or None,
    )
