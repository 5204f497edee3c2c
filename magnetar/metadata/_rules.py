"""Rules every metadata backend shares: key validation, the compare-and-set decision, watch fan-out.

Owning these in one place is what lets the backends agree exactly (the differential tests check it).
This module knows nothing of how records are stored, and nothing of storage, ledgers or the broker.

Key rules: a key is an absolute path (``/a/b``) with no empty segment and no trailing slash, at most
``KEY_CHARS_MAX`` characters, with no NUL and nothing that cannot be encoded as UTF-8. ``/`` (the root) is
a valid path to read (``get``, ``exists``, ``children``, ``watch``) but never holds a record, so ``put`` and
``delete`` reject it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from magnetar.metadata.api import (
    NEW_KEY,
    BadVersion,
    InvalidKey,
    MetadataError,
    NotFound,
    WatchCallback,
    WatchEvent,
)

logger = logging.getLogger("magnetar.metadata")

KEY_CHARS_MAX = 4096
WATCHES_MAX = 10_000
ROOT = "/"


def validate_key(key: str, *, allow_root: bool) -> None:
    """Raise InvalidKey unless ``key`` is an absolute, normalised path (``/`` only when ``allow_root``)."""
    if not isinstance(key, str):
        raise InvalidKey(f"key must be a str, not {type(key).__name__}", key=None)
    if key == ROOT:
        if allow_root:
            return
        raise InvalidKey("the root holds no record", key=key)
    if len(key) > KEY_CHARS_MAX:
        raise InvalidKey(f"key longer than {KEY_CHARS_MAX} characters", key=key)
    if not key.startswith("/") or key.endswith("/") or "//" in key:
        raise InvalidKey("key must be absolute, without empty segments or a trailing slash", key=key)
    if "\x00" in key:
        raise InvalidKey("key contains NUL", key=key)
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidKey("key is not valid UTF-8 text", key=key) from exc


def children_prefix(key: str) -> str:
    """The string every descendant of ``key`` starts with."""
    return ROOT if key == ROOT else key + "/"


def child_names(prefix: str, descendants: list[str]) -> list[str]:
    """Sorted distinct first segments of ``descendants`` after ``prefix``."""
    return sorted({k[len(prefix) :].split("/", 1)[0] for k in descendants if k.startswith(prefix)})


def _check_expected_valid(expected_version: int | None) -> None:
    if expected_version is not None and expected_version < NEW_KEY:
        raise ValueError(f"expected_version must be None, NEW_KEY or >= 0, not {expected_version}")


def check_put(key: str, current_version: int | None, expected_version: int | None) -> None:
    """Decide a compare-and-set put; ``current_version`` is None when the key is absent."""
    _check_expected_valid(expected_version)
    if expected_version is None:
        return
    if expected_version == NEW_KEY:
        if current_version is not None:
            raise BadVersion(f"{key} exists (version {current_version})", key=key)
        return
    if current_version is None:
        raise NotFound(f"{key} does not exist", key=key)
    if current_version != expected_version:
        raise BadVersion(f"{key} is at version {current_version}, not {expected_version}", key=key)


def check_delete(key: str, current_version: int | None, expected_version: int | None) -> None:
    """Decide a compare-and-set delete; absent keys are NotFound whatever the expected version."""
    _check_expected_valid(expected_version)
    if current_version is None:
        raise NotFound(f"{key} does not exist", key=key)
    if expected_version is not None and current_version != expected_version:
        raise BadVersion(f"{key} is at version {current_version}, not {expected_version}", key=key)


def _covers(prefix: str, key: str) -> bool:
    return prefix == ROOT or key == prefix or key.startswith(prefix + "/")


class Watchers:
    """Callbacks by prefix. A failing callback is logged and never undoes or blocks the write."""

    def __init__(self) -> None:
        self._next_id = 0
        self._watches: dict[int, tuple[str, WatchCallback]] = {}

    def add(self, prefix: str, callback: WatchCallback) -> Callable[[], None]:
        validate_key(prefix, allow_root=True)
        if len(self._watches) >= WATCHES_MAX:
            raise MetadataError(f"more than {WATCHES_MAX} watches", key=prefix)
        watch_id = self._next_id
        self._next_id += 1
        self._watches[watch_id] = (prefix, callback)

        def unwatch() -> None:
            self._watches.pop(watch_id, None)

        return unwatch

    def notify(self, event: WatchEvent) -> None:
        # A snapshot: callbacks may watch or unwatch while we iterate.
        for prefix, callback in list(self._watches.values()):
            if not _covers(prefix, event.key):
                continue
            try:
                callback(event)
            except Exception:
                logger.exception("metadata watch callback for %s failed on %s", prefix, event)

    def __bool__(self) -> bool:
        return bool(self._watches)

    def prefixes(self) -> list[str]:
        """The watched prefixes, each once."""
        return sorted({prefix for prefix, _ in self._watches.values()})

    def clear(self) -> None:
        self._watches.clear()
