"""Configuration values: small keyword-only frozen dataclasses, picklable by construction.

These are what a ``Client`` pickles (never sockets), so a Spark executor rebuilds the same client
from them. They validate themselves and turn user-facing strings ("shared", "lz4") into wire enums.
Knows nothing of connections or asyncio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from magnetar.client.auth import Authentication
from magnetar.client.errors import InvalidConfiguration
from magnetar.protocol import pb

__all__ = [
    "ACCESS_MODES",
    "COMPRESSION_TYPES",
    "SUBSCRIPTION_TYPES",
    "BatchingConfig",
    "ClientConfig",
    "ConsumerConfig",
    "DeadLetterPolicy",
    "ProducerConfig",
]

SUBSCRIPTION_TYPES: Final = {
    "exclusive": pb.CommandSubscribe.Exclusive,
    "shared": pb.CommandSubscribe.Shared,
    "failover": pb.CommandSubscribe.Failover,
    "key_shared": pb.CommandSubscribe.Key_Shared,
}
COMPRESSION_TYPES: Final = {
    "none": pb.NONE,
    "lz4": pb.LZ4,
    "zlib": pb.ZLIB,
    "zstd": pb.ZSTD,
    "snappy": pb.SNAPPY,
}
ACCESS_MODES: Final = {
    "shared": pb.Shared,
    "exclusive": pb.Exclusive,
    "wait_for_exclusive": pb.WaitForExclusive,
    "exclusive_with_fencing": pb.ExclusiveWithFencing,
}
InitialPosition = Literal["latest", "earliest"]
Routing = Literal["round_robin", "key_hash"]


def _choice(table: Mapping[str, int], value: str, what: str) -> int:
    try:
        return int(table[value.lower()])
    except KeyError:
        raise InvalidConfiguration(f"unknown {what} {value!r}; expected one of {sorted(table)}") from None


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise InvalidConfiguration(f"{name} must be > 0, got {value}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    service_url: str
    operation_timeout_ms: int = 30_000
    connect_timeout_ms: int = 10_000
    keepalive_interval_ms: int = 30_000
    backoff_initial_ms: int = 100
    backoff_max_ms: int = 60_000
    max_lookup_redirects: int = 20
    max_frame_bytes: int = 5 * 1024 * 1024 + 10 * 1024 + 64 * 1024
    authentication: Authentication | None = None  # token or basic credentials sent with CONNECT

    def __post_init__(self) -> None:
        if not self.service_url.startswith("pulsar://"):
            raise InvalidConfiguration(f"only pulsar:// service URLs are supported, got {self.service_url!r}")
        for name in ("operation_timeout_ms", "connect_timeout_ms", "keepalive_interval_ms", "backoff_initial_ms"):
            _positive(name, getattr(self, name))
        if self.backoff_max_ms < self.backoff_initial_ms:
            raise InvalidConfiguration("backoff_max_ms must be >= backoff_initial_ms")


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchingConfig:
    max_messages: int = 1000
    max_bytes: int = 128 * 1024
    max_delay_ms: int = 10

    def __post_init__(self) -> None:
        _positive("batching max_messages", self.max_messages)
        _positive("batching max_bytes", self.max_bytes)
        if self.max_delay_ms < 0:
            raise InvalidConfiguration("batching max_delay_ms must be >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig:
    topic: str
    producer_name: str | None = None
    batching: BatchingConfig | None = None
    compression: str = "none"
    access_mode: str = "shared"
    max_pending_messages: int = 1000
    block_if_queue_full: bool = True
    send_timeout_ms: int = 30_000
    chunking: bool = False
    initial_sequence_id: int | None = None
    routing: Routing = "round_robin"
    properties: tuple[tuple[str, str], ...] = ()
    initial_subscription_name: str | None = None

    def __post_init__(self) -> None:
        self.compression_type  # noqa: B018 - validates
        self.access_mode_value  # noqa: B018 - validates
        _positive("max_pending_messages", self.max_pending_messages)
        if self.chunking and self.batching is not None:
            raise InvalidConfiguration("chunking requires batching to be off")
        if self.routing not in ("round_robin", "key_hash"):
            raise InvalidConfiguration(f"unknown routing {self.routing!r}")

    @property
    def compression_type(self) -> int:
        return _choice(COMPRESSION_TYPES, self.compression, "compression")

    @property
    def access_mode_value(self) -> int:
        return _choice(ACCESS_MODES, self.access_mode, "access mode")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetterPolicy:
    max_redeliver_count: int
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None

    def __post_init__(self) -> None:
        _positive("max_redeliver_count", self.max_redeliver_count)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig:
    subscription: str
    subscription_type: str = "exclusive"
    consumer_name: str | None = None
    initial_position: InitialPosition = "latest"
    receiver_queue_size: int = 1000
    ack_group_time_ms: int = 100
    ack_group_max_size: int = 1000
    batch_index_ack: bool = False
    negative_ack_delay_ms: int = 60_000
    dead_letter_policy: DeadLetterPolicy | None = None
    durable: bool = True
    start_message_inclusive: bool = False
    max_pending_chunked_messages: int = 10
    properties: tuple[tuple[str, str], ...] = field(default=())
    priority_level: int = 0

    def __post_init__(self) -> None:
        self.subscription_type_value  # noqa: B018 - validates
        _positive("receiver_queue_size", self.receiver_queue_size)
        _positive("ack_group_max_size", self.ack_group_max_size)
        if self.negative_ack_delay_ms < 100:
            raise InvalidConfiguration("negative_ack_delay_ms must be >= 100")
        if self.initial_position not in ("latest", "earliest"):
            raise InvalidConfiguration(f"unknown initial_position {self.initial_position!r}")

    @property
    def subscription_type_value(self) -> int:
        return _choice(SUBSCRIPTION_TYPES, self.subscription_type, "subscription type")

    @property
    def is_shared(self) -> bool:
        return self.subscription_type_value in (pb.CommandSubscribe.Shared, pb.CommandSubscribe.Key_Shared)
