"""Where the cluster issues put the records of several brokers sharing the work (``specs/cluster.md``); not
used yet: a standalone broker owns everything (``broker/cluster``'s LocalOwnership) and writes none of them.

- ``/loadbalance/brokers/<broker id>``: a live broker's ephemeral registration (its URLs, its load);
- ``/namespace/<tenant>/<namespace>/<bundle range>``: the ephemeral lock of the broker owning a bundle;
- ``/admin/local-policies/<tenant>/<namespace>``: a namespace's cluster-local policies (its bundles).

Their typed records and the resources reading and writing them join this module with the ownership issue;
the keys are spelled here already so that nothing else ever spells them.
"""

from __future__ import annotations

from magnetar.resources._names import NamespaceRef

BROKERS_ROOT = "/loadbalance/brokers"
OWNERSHIP_ROOT = "/namespace"
LOCAL_POLICIES_ROOT = "/admin/local-policies"


def broker_key(broker_id: str) -> str:
    """``broker_id`` is ``host:port`` (Pulsar's lookup id of a broker): one key segment."""
    return f"{BROKERS_ROOT}/{broker_id}"


def bundle_owner_key(ns: NamespaceRef, bundle_range: str) -> str:
    """``bundle_range`` as Pulsar spells it: ``0x00000000_0x40000000``."""
    return f"{OWNERSHIP_ROOT}/{ns.tenant}/{ns.namespace}/{bundle_range}"


def local_policies_key(ns: NamespaceRef) -> str:
    return f"{LOCAL_POLICIES_ROOT}/{ns.tenant}/{ns.namespace}"
