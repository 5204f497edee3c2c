"""The HTTP side of a bundle transfer: telling the destination broker to take a bundle as soon as this one
lets go of it (``PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/take``, magnetar's own endpoint: the
destination starts waiting for the bundle's lock and holds the clients that reach it first until it has it).
One aiohttp client session per broker, closed with it; each call bounded by ``timeout_s``."""

from __future__ import annotations

import aiohttp

from magnetar.broker.cluster.bundles import BundleRange
from magnetar.broker.cluster.records import BrokerReport
from magnetar.broker.names import NamespaceName

CALL_TIMEOUT_S = 5.0


class HandoffFailed(Exception):
    pass


class HttpHandoff:
    def __init__(self, timeout_s: float = CALL_TIMEOUT_S) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def prepare(self, destination: BrokerReport, ns: NamespaceName, bundle: BundleRange) -> None:
        base = destination.urls.http
        if not base:
            raise HandoffFailed(f"broker {destination.broker_id} has no plain web service URL")
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        url = f"{base}/admin/v2/namespaces/{ns.tenant}/{ns.namespace}/{bundle.name}/take"
        async with self._session.put(url) as response:
            if response.status >= 300:
                raise HandoffFailed(f"{url} answered {response.status}: {(await response.text())[:200]}")

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()
