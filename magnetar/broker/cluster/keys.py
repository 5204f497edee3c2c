"""The metadata keys of a cluster's coordination and the records under them (the roots are
``magnetar.resources``'; the records move into ``magnetar.resources.ownership`` next).

- ``/loadbalance/brokers/<host:port>``: a live broker's ephemeral registration (:class:`BrokerReport`);
- ``/loadbalance/leader``: the leader election's key (:class:`LeaderData`);
- ``/namespace/<tenant>/<namespace>/<0xLOWER_0xUPPER>``: a bundle's ephemeral ownership lock (:class:`OwnerData`);
- ``/admin/local-policies/<tenant>/<namespace>``: the namespace's cluster-local policies; magnetar writes
  their ``bundles`` (Pulsar's ``LocalPolicies.bundles``) when a bundle is split;
- a namespace's own policies may hold ``bundles`` too (set when it was created with a bundle count).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from magnetar.broker.cluster.bundles import BundleError, BundleRange, Bundles
from magnetar.broker.cluster.records import BrokerReport, OwnerData
from magnetar.broker.names import NamespaceName
from magnetar.metadata import api as md
from magnetar.metadata.election import LEADER_KEY
from magnetar.resources.ownership import BROKERS_ROOT, LOCAL_POLICIES_ROOT, OWNERSHIP_ROOT
from magnetar.resources.tenants import POLICIES_ROOT

log = logging.getLogger("magnetar.cluster")

LEADER = LEADER_KEY

__all__ = ["BROKERS_ROOT", "LEADER", "LOCAL_POLICIES_ROOT", "OWNERSHIP_ROOT", "POLICIES_ROOT", "ClusterKeys",
           "StoredBundles"]


def broker_key(broker_id: str) -> str:
    return f"{BROKERS_ROOT}/{broker_id}"


def bundle_key(ns: NamespaceName, bundle: BundleRange) -> str:
    return f"{OWNERSHIP_ROOT}/{ns.tenant}/{ns.namespace}/{bundle.name}"


def bundle_of_key(key: str) -> tuple[NamespaceName, BundleRange] | None:
    """The namespace and bundle a lock key names (None for another key)."""
    parts = key.removeprefix(OWNERSHIP_ROOT + "/").split("/")
    if not key.startswith(OWNERSHIP_ROOT + "/") or len(parts) != 3:
        return None
    try:
        return NamespaceName(parts[0], parts[1]), BundleRange.parse(parts[2])
    except BundleError:
        return None


def local_policies_key(ns: NamespaceName) -> str:
    return f"{LOCAL_POLICIES_ROOT}/{ns.tenant}/{ns.namespace}"


def policies_key(ns: NamespaceName) -> str:
    return f"{POLICIES_ROOT}/{ns.tenant}/{ns.namespace}"


@dataclass(frozen=True, slots=True)
class StoredBundles:
    """A namespace's bundles and the version of the local-policies record that holds them (-1: none yet)."""

    bundles: Bundles
    version: int
    fields: dict[str, Any]  # the whole local-policies record, kept when the bundles are rewritten


def _object(raw: bytes, key: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        log.warning("%s is not JSON: read as empty", key)
        return {}
    return value if isinstance(value, dict) else {}


def _bundles_in(fields: dict[str, Any], key: str) -> Bundles | None:
    value = fields.get("bundles")
    if not isinstance(value, dict) or "boundaries" not in value:
        return None
    try:
        return Bundles.from_json(value)
    except BundleError as exc:
        log.warning("%s holds bad bundles (%s): the default cut applies", key, exc)
        return None


class ClusterKeys:
    """Reads and compare-and-set writes of the cluster's records on one metadata store."""

    def __init__(self, store: md.MetadataStore, default_bundles: int) -> None:
        self.store = store
        self.default_bundles = default_bundles

    async def brokers(self) -> dict[str, BrokerReport]:
        """Every registered broker's report (unreadable ones left out)."""
        found: dict[str, BrokerReport] = {}
        for broker_id in await self.store.children(BROKERS_ROOT):
            record = await self.store.get(broker_key(broker_id))
            if record is None:
                continue
            report = BrokerReport.decode(broker_id, record.value)
            if report is not None:
                found[broker_id] = report
        return found

    async def owner(self, ns: NamespaceName, bundle: BundleRange) -> OwnerData | None:
        record = await self.store.get(bundle_key(ns, bundle))
        return None if record is None else OwnerData.decode(record.value, record.key)

    async def owned_bundles(self, ns: NamespaceName) -> list[str]:
        """The names of the namespace's bundles that have an ownership lock now."""
        return await self.store.children(f"{OWNERSHIP_ROOT}/{ns.tenant}/{ns.namespace}")

    async def bundles(self, ns: NamespaceName) -> StoredBundles:
        """The namespace's bundles: its local policies' if set, else its policies', else the default cut."""
        key = local_policies_key(ns)
        record = await self.store.get(key)
        fields = _object(record.value, key) if record is not None else {}
        version = record.version if record is not None else md.NEW_KEY
        local = _bundles_in(fields, key)
        if local is not None:
            return StoredBundles(local, version, fields)
        policies = await self.store.get(policies_key(ns))
        declared = _bundles_in(_object(policies.value, policies.key), policies.key) if policies is not None else None
        return StoredBundles(declared or Bundles.default(self.default_bundles), version, fields)

    async def put_bundles(self, ns: NamespaceName, stored: StoredBundles, bundles: Bundles) -> None:
        """Write ``bundles`` into the local policies, compare-and-set on ``stored.version`` (BadVersion when
        another writer changed them meanwhile)."""
        fields = dict(stored.fields)
        fields["bundles"] = bundles.to_json()
        await self.store.put(local_policies_key(ns), json.dumps(fields).encode(), stored.version)
