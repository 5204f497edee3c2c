"""Which metadata store a process uses, and how to open it: Pulsar's ``metadataStoreUrl`` and its neighbours.

``config.py`` parses the keys into :class:`MetadataSettings`; the composition root calls :func:`open_store`.

- ``metadataStoreUrl``: empty or ``sqlite:`` is the embedded store (``<data dir>/metadata.db``);
  ``sqlite:/path/file.db`` an embedded store in that file; ``zk:host:port[,host:port...][/chroot]`` ZooKeeper
  (a URL without a scheme is ZooKeeper too, as in Pulsar).
- ``configurationMetadataStoreUrl``: the store of cluster-wide configuration (tenants, namespaces, clusters);
  empty means the same store. A separate one is refused for now: one store holds everything.
- ``metadataStoreSessionTimeoutMillis`` (30000), ``metadataStoreOperationTimeoutSeconds`` (30).
- ``zookeeperSessionExpiredPolicy``: ``reconnect`` (keep serving and open a new session; locks are revalidated)
  or ``shutdown`` (the broker stops when its session is lost).

Knows nothing of storage, ledgers or the broker.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from magnetar.metadata.api import MetadataError
from magnetar.metadata.coordination import CoordinationStore
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.metadata.zk_codec import parse_zk_url
from magnetar.metadata.zookeeper import ZooKeeperMetadataStore

EMBEDDED_FILE = "metadata.db"


class StoreKind(enum.Enum):
    SQLITE = "sqlite"
    ZOOKEEPER = "zookeeper"


class SessionExpiredPolicy(enum.Enum):
    RECONNECT = "reconnect"
    SHUTDOWN = "shutdown"


def store_kind(url: str) -> StoreKind:
    """The kind of store ``url`` names; ValueError when it names none magnetar has."""
    if url == "" or url.startswith("sqlite:"):
        return StoreKind.SQLITE
    try:
        parse_zk_url(zk_url(url))
    except ValueError as exc:
        if url.startswith("zk:"):
            raise
        raise ValueError(f"unknown metadata store {url!r}: use zk:host:port[,host:port][/chroot] or "
                         f"sqlite:[path]") from exc
    return StoreKind.ZOOKEEPER


def zk_url(url: str) -> str:
    """Pulsar reads a URL without a scheme as ZooKeeper's."""
    return url if url.startswith("zk:") else "zk:" + url


def check_url(url: str) -> str:
    """``url`` if it names a store (for config parsing); ValueError if not."""
    store_kind(url)
    return url


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataSettings:
    store_url: str = ""
    configuration_store_url: str = ""  # empty: the same store
    session_timeout_ms: int = 30_000
    operation_timeout_s: int = 30
    session_expired_policy: SessionExpiredPolicy = SessionExpiredPolicy.RECONNECT

    @property
    def kind(self) -> StoreKind:
        return store_kind(self.store_url)

    def problems(self) -> list[str]:
        """What is wrong with these settings together (empty when nothing)."""
        wrong = []
        for name, url in (("metadataStoreUrl", self.store_url),
                          ("configurationMetadataStoreUrl", self.configuration_store_url)):
            try:
                store_kind(url)
            except ValueError as exc:
                wrong.append(f"{name}: {exc}")
        if self.configuration_store_url not in ("", self.store_url):
            wrong.append("configurationMetadataStoreUrl: a configuration store apart from metadataStoreUrl is not "
                         "supported; leave it empty or set it to the same URL")
        if self.session_timeout_ms <= 0 or self.operation_timeout_s <= 0:
            wrong.append("metadataStoreSessionTimeoutMillis and metadataStoreOperationTimeoutSeconds must be positive")
        return wrong


def sqlite_path(url: str, data_dir: Path) -> Path:
    rest = url.removeprefix("sqlite:")
    return Path(rest) if rest else data_dir / EMBEDDED_FILE


async def open_store(settings: MetadataSettings, data_dir: Path) -> CoordinationStore:
    """Open (and for ZooKeeper, connect) the store the settings name. MetadataError when it cannot."""
    wrong = settings.problems()
    if wrong:
        raise MetadataError("; ".join(wrong))
    if settings.kind is StoreKind.SQLITE:
        return SqliteMetadataStore(sqlite_path(settings.store_url, data_dir))
    store = ZooKeeperMetadataStore.from_url(zk_url(settings.store_url), session_timeout_ms=settings.session_timeout_ms,
                                            operation_timeout_s=float(settings.operation_timeout_s))
    return await store.start()
