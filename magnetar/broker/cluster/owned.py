"""One bundle this broker owns or is taking or giving up: its lifecycle and its lock.

``BUNDLE_TRANSITIONS``::

    ACQUIRING -> OWNED | RELEASED        (the lock is taken, or another broker had it)
    OWNED     -> UNLOADING | LOST        (an unload, a split or shutdown gives it up; another took it)
    UNLOADING -> RELEASED | LOST
    RELEASED, LOST: terminal             (the bundle is no longer this broker's)

Only OWNED serves: a producer or consumer of a topic in a bundle in any other state is told to look the topic
up again. ``done`` completes on a terminal state, so whoever waits for a bundle to settle waits on it.
"""

from __future__ import annotations

import asyncio
import enum

from magnetar.broker.cluster.bundles import BundleRange
from magnetar.broker.names import NamespaceName
from magnetar.core.lifecycle import Transitions
from magnetar.metadata.locks import ResourceLock


class BundleState(enum.Enum):
    ACQUIRING = "acquiring"
    OWNED = "owned"
    UNLOADING = "unloading"
    RELEASED = "released"
    LOST = "lost"


BUNDLE_TRANSITIONS = Transitions(BundleState, {
    BundleState.ACQUIRING: {BundleState.OWNED, BundleState.RELEASED},
    BundleState.OWNED: {BundleState.UNLOADING, BundleState.LOST},
    BundleState.UNLOADING: {BundleState.RELEASED, BundleState.LOST},
    BundleState.RELEASED: set(),
    BundleState.LOST: set(),
})


def bundle_name(ns: NamespaceName, bundle: BundleRange) -> str:
    """``tenant/namespace/0x..._0x...``: how Pulsar names a bundle in reports and admin answers."""
    return f"{ns}/{bundle.name}"


class OwnedBundle:
    def __init__(self, ns: NamespaceName, bundle: BundleRange) -> None:
        self.ns = ns
        self.range = bundle
        self.name = bundle_name(ns, bundle)
        self.state = BundleState.ACQUIRING
        self.lock: ResourceLock | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def __repr__(self) -> str:
        return f"OwnedBundle({self.name}, {self.state.value})"

    @property
    def serving(self) -> bool:
        return self.state is BundleState.OWNED

    @property
    def settled(self) -> bool:
        return self.state in BUNDLE_TRANSITIONS.terminal()

    def transition_to(self, state: BundleState) -> None:
        self.state = BUNDLE_TRANSITIONS.check(self.state, state, f"bundle {self.name}")
        if self.settled and not self.done.done():
            self.done.set_result(None)
