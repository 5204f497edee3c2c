"""The shapes of the names resources take: anything with the parts a key is made of (the broker's
``NamespaceName`` and ``TopicName`` have them). Structural, so this layer imports nothing of the broker."""

from __future__ import annotations

import urllib.parse
from typing import Protocol


class NamespaceRef(Protocol):
    @property
    def tenant(self) -> str: ...

    @property
    def namespace(self) -> str: ...


class TopicRef(Protocol):
    @property
    def domain(self) -> str: ...

    @property
    def tenant(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def local_name(self) -> str: ...


def quoted(segment: str) -> str:
    """A name part that may hold ``/`` and any character, as one key segment (URL-encoded, as Pulsar does)."""
    return urllib.parse.quote(segment, safe="")


def unquoted(segment: str) -> str:
    return urllib.parse.unquote(segment)
