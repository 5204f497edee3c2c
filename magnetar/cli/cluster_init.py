"""``magnetar initialize-cluster-metadata``: Pulsar's ``pulsar initialize-cluster-metadata``.

Writes, in the metadata store a cluster's brokers will share, what they need before the first one starts: the
cluster's record (``/admin/clusters/<cluster>``, Pulsar's ``ClusterData`` JSON with the service URLs), the
``public`` and ``pulsar`` tenants allowed on the cluster, and the ``public/default`` and ``pulsar/system``
namespaces. Every write is compare-and-set, so it is safe to run again and beside a running broker: what exists
and agrees is left alone, a cluster record with other URLs is updated, a tenant missing the cluster gets it.

Exit codes: 0 done, 1 the store cannot be reached or refused a write, 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from magnetar.broker.names import NamespaceName
from magnetar.broker.registry.catalog import SYSTEM_NAMESPACES
from magnetar.metadata.api import NEW_KEY, BadVersion, MetadataError
from magnetar.metadata.settings import MetadataSettings, open_store, store_kind
from magnetar.resources import MetadataResources, Policies, TenantInfo, Versioned

__all__ = ["add_cluster_init_parser", "run_cluster_init"]

WRITE_ATTEMPTS_MAX = 8
T = TypeVar("T")


def add_cluster_init_parser(verbs: Any) -> None:
    p = verbs.add_parser("initialize-cluster-metadata", help="write a cluster's records into its metadata store",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", required=True, help="the cluster's name (clusterName of its brokers)")
    p.add_argument("--metadata-store", required=True, help="zk:host:port[,host:port][/chroot] or sqlite:PATH")
    p.add_argument("--configuration-metadata-store", default="",
                   help="the configuration store (default: the metadata store; a separate one is not supported)")
    p.add_argument("--web-service-url", default="", help="http://host:8080")
    p.add_argument("--web-service-url-tls", default="", help="https://host:8443")
    p.add_argument("--broker-service-url", default="", help="pulsar://host:6650")
    p.add_argument("--broker-service-url-tls", default="", help="pulsar+ssl://host:6651")
    p.add_argument("--metadata-store-session-timeout-ms", type=int, default=30_000)
    p.add_argument("--metadata-store-operation-timeout-seconds", type=int, default=30)


def run_cluster_init(args: argparse.Namespace) -> int:
    settings = MetadataSettings(store_url=args.metadata_store,
                                configuration_store_url=args.configuration_metadata_store,
                                session_timeout_ms=args.metadata_store_session_timeout_ms,
                                operation_timeout_s=args.metadata_store_operation_timeout_seconds)
    wrong = settings.problems()
    if not args.metadata_store:
        wrong.append("--metadata-store is required")
    if not args.cluster or "/" in args.cluster:
        wrong.append(f"--cluster must be a name without '/', not {args.cluster!r}")
    if wrong:
        print("magnetar initialize-cluster-metadata: " + "; ".join(wrong), file=sys.stderr)
        return 2
    cluster = {"serviceUrl": args.web_service_url, "serviceUrlTls": args.web_service_url_tls,
               "brokerServiceUrl": args.broker_service_url, "brokerServiceUrlTls": args.broker_service_url_tls}
    try:
        for line in asyncio.run(_initialize(settings, args.cluster, cluster)):
            print(line)
    except MetadataError as exc:
        print(f"magnetar initialize-cluster-metadata: {args.metadata_store}: {exc}", file=sys.stderr)
        return 1
    return 0


async def _initialize(settings: MetadataSettings, name: str, cluster: dict[str, str]) -> list[str]:
    store_kind(settings.store_url)
    store = await open_store(settings, Path("."))
    res = MetadataResources(store)
    try:
        done = [await _write(lambda: res.clusters.get(name), lambda new, v: res.clusters.put(name, new, v),
                             lambda old: {**(old or {}), **cluster}, f"cluster {name}")]
        for ns in SYSTEM_NAMESPACES:
            done.append(await _init_tenant(res, ns.tenant, name))
            done.append(await _init_namespace(res, ns))
        return done
    finally:
        await res.close()
        await store.close()


async def _init_tenant(res: MetadataResources, tenant: str, cluster: str) -> str:
    return await _write(lambda: res.tenants.get(tenant), lambda new, v: res.tenants.put(tenant, new, v),
                        lambda old: _tenant(old, cluster), f"tenant {tenant}")


async def _init_namespace(res: MetadataResources, ns: NamespaceName) -> str:
    def keep(old: Policies | None) -> Policies:
        return old if old is not None else Policies()

    return await _write(lambda: res.namespaces.get(ns), lambda new, v: res.namespaces.put(ns, new, v), keep,
                        f"namespace {ns}")


def _tenant(old: TenantInfo | None, cluster: str) -> TenantInfo:
    old = old or TenantInfo()
    allowed = old.allowed_clusters
    return TenantInfo(old.admin_roles, allowed if cluster in allowed else (*allowed, cluster))


async def _write(read: Callable[[], Awaitable[Versioned[T] | None]], write: Callable[[T, int], Awaitable[None]],
                 update: Callable[[T | None], T], what: str) -> str:
    """Create the record (from ``update(None)``) or bring it to ``update(old)``, compare-and-set; says what it
    did."""
    for _ in range(WRITE_ATTEMPTS_MAX):  # bounded: each retry follows another writer's change
        record = await read()
        old = None if record is None else record.value
        new = update(old)
        if record is not None and new == old:
            return f"{what}: exists"
        try:
            await write(new, NEW_KEY if record is None else record.version)
        except BadVersion:
            continue
        return f"{what}: {'created' if record is None else 'updated'}"
    raise MetadataError(f"{what} keeps changing under concurrent writers")
