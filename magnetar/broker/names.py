"""Topic and namespace names: validation, normalisation and the managed-ledger name of a topic.

Pulsar's rules: ``my-topic`` means ``persistent://public/default/my-topic``; ``tenant/ns/topic`` means
``persistent://tenant/ns/topic``; tenant and namespace may use only ``[A-Za-z0-9_\\-=:.]``; the local name
is everything after the namespace and may contain ``/``; ``<topic>-partition-<i>`` names partition i.
This module is pure string logic.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

from magnetar.broker.errors import InvalidTopicName

_SEGMENT = re.compile(r"[A-Za-z0-9_\-=:.]+")  # used with fullmatch: a trailing newline does not pass
PARTITION_SUFFIX = "-partition-"
DOMAINS = ("persistent", "non-persistent")
# Every name ends up in metadata keys of at most 4,096 characters (``/managed-ledgers/<tenant>/<ns>/
# persistent/<encoded local>/<encoded cursor>``), so each part is bounded in its stored (URL-encoded) form.
SEGMENT_CHARS_MAX = 128  # a tenant, namespace or cluster name
LOCAL_NAME_CHARS_MAX = 1024
LOCAL_NAME_ENCODED_CHARS_MAX = 1500  # 1,024 x "e-acute" is 6,144 encoded characters: refused
SUBSCRIPTION_NAME_CHARS_MAX = 1024
SUBSCRIPTION_NAME_ENCODED_CHARS_MAX = 2048
_DOT_NAMES = (".", "..")


def valid_segment(text: str) -> bool:
    """A tenant, namespace or cluster name: Pulsar's characters, bounded, not ``.`` or ``..``."""
    return len(text) <= SEGMENT_CHARS_MAX and text not in _DOT_NAMES and _SEGMENT.fullmatch(text) is not None


def valid_subscription_name(name: str) -> bool:
    return (
        0 < len(name) <= SUBSCRIPTION_NAME_CHARS_MAX
        and len(urllib.parse.quote(name, safe="")) <= SUBSCRIPTION_NAME_ENCODED_CHARS_MAX
        and not any(ord(c) < 0x20 for c in name)
    )


@dataclass(frozen=True, slots=True)
class NamespaceName:
    tenant: str
    namespace: str

    @classmethod
    def parse(cls, text: str) -> NamespaceName:
        parts = text.split("/")
        if len(parts) != 2 or not all(valid_segment(p) for p in parts):
            raise InvalidTopicName(f"Invalid namespace name: {text!r}")
        return cls(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.tenant}/{self.namespace}"


@dataclass(frozen=True, slots=True)
class TopicName:
    domain: str
    tenant: str
    namespace: str
    local_name: str

    @classmethod
    def parse(cls, text: str) -> TopicName:
        """Parse and normalise a topic name as Pulsar does; raise InvalidTopicName otherwise."""
        if not text or "\x00" in text:
            raise InvalidTopicName(f"Invalid topic name: {text!r}")
        if "://" not in text:
            parts = text.split("/")
            if len(parts) == 1:
                text = f"persistent://public/default/{text}"
            elif len(parts) == 3:
                text = f"persistent://{text}"
            else:
                raise InvalidTopicName(f"Invalid short topic name {text!r}: use tenant/namespace/topic")
        domain, _, rest = text.partition("://")
        if domain not in DOMAINS:
            raise InvalidTopicName(f"Invalid topic domain {domain!r} in {text!r}")
        parts = rest.split("/", 2)
        if len(parts) != 3 or not parts[2]:
            raise InvalidTopicName(f"Invalid topic name {text!r}: expected {domain}://tenant/namespace/topic")
        tenant, namespace, local = parts
        if not valid_segment(tenant) or not valid_segment(namespace):
            raise InvalidTopicName(f"Invalid tenant or namespace in topic name {text[:200]!r}")
        if (
            len(local) > LOCAL_NAME_CHARS_MAX
            or local in _DOT_NAMES
            or any(ord(c) < 0x20 for c in local)
            or len(urllib.parse.quote(local, safe="")) > LOCAL_NAME_ENCODED_CHARS_MAX
        ):
            raise InvalidTopicName(f"Invalid local topic name in {text[:200]!r}")
        return cls(domain, tenant, namespace, local)

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local_name}"

    @property
    def namespace_name(self) -> NamespaceName:
        return NamespaceName(self.tenant, self.namespace)

    @property
    def persistent(self) -> bool:
        return self.domain == "persistent"

    @property
    def partition_index(self) -> int:
        """The partition index of a ``-partition-N`` name, else -1."""
        head, sep, tail = self.local_name.rpartition(PARTITION_SUFFIX)
        if not sep or not head:
            return -1
        try:
            index = int(tail)
        except ValueError:
            return -1
        return index if index >= 0 else -1

    @property
    def is_partition(self) -> bool:
        return self.partition_index >= 0

    @property
    def partitioned_topic_name(self) -> TopicName:
        """The parent partitioned topic of a partition (itself otherwise)."""
        if not self.is_partition:
            return self
        head = self.local_name.rpartition(PARTITION_SUFFIX)[0]
        return TopicName(self.domain, self.tenant, self.namespace, head)

    def partition(self, index: int) -> TopicName:
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local_name}{PARTITION_SUFFIX}{index}")

    @property
    def managed_ledger_name(self) -> str:
        """``tenant/ns/persistent/<url-encoded local name>``, as Pulsar names a topic's managed ledger."""
        encoded = urllib.parse.quote(self.local_name, safe="")
        return f"{self.tenant}/{self.namespace}/{self.domain}/{encoded}"

    @classmethod
    def from_managed_ledger_name(cls, name: str) -> TopicName:
        tenant, namespace, domain, encoded = name.split("/", 3)
        return cls(domain, tenant, namespace, urllib.parse.unquote(encoded))


#: the local names of Pulsar's system topics in a namespace (PIP-39 events, PIP-178 snapshots)
SYSTEM_TOPIC_NAMES = frozenset({"__change_events", "__transaction_buffer_snapshot",
                                "__transaction_buffer_snapshot_segments", "__transaction_buffer_snapshot_indexes"})
PENDING_ACK_SUFFIX = "__transaction_pending_ack"


def is_system_topic(name: str) -> bool:
    """A topic the broker keeps for itself, which topic lists leave out unless asked (``includeSystemTopic``)."""
    try:
        local = TopicName.parse(name).partitioned_topic_name.local_name
    except InvalidTopicName:
        return False
    return local in SYSTEM_TOPIC_NAMES or local.endswith(PENDING_ACK_SUFFIX)
