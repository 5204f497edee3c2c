"""Bounds on what a client names itself: producer and consumer names and their metadata maps.

Names and metadata are kept for the life of a producer or consumer and repeated in stats, metrics and
Key_Shared hashing, so a client must not make them arbitrarily large. Metadata is measured as Pulsar
measures it (characters of every key and value, ``maxConsumerMetadataSize``) and refused with
MetadataError as Pulsar does.
"""

from __future__ import annotations

from collections.abc import Iterable

from magnetar import protocol as proto
from magnetar.broker.errors import MetadataError, NotAllowed


def checked_name(name: str, what: str, chars_max: int) -> str:
    if len(name) > chars_max:
        raise NotAllowed(f"{what} name of {len(name)} characters is longer than {chars_max}")
    return name


def checked_metadata(pairs: Iterable[proto.pb.KeyValue], what: str, chars_max: int) -> dict[str, str]:
    metadata: dict[str, str] = {}
    size = 0
    for kv in pairs:
        size += len(kv.key) + len(kv.value)
        if size > chars_max:
            raise MetadataError(f"{what} metadata is larger than {chars_max} characters")
        metadata[kv.key] = kv.value
    return metadata
