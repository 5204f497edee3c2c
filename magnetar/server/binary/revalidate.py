"""Permissions taken away apply to clients already connected, as in Pulsar (a policies update re-checks the
topic's producers and consumers): when a tenant's or a namespace's policies change, every live producer and
consumer of that tenant is checked again, and one whose role lost its permission is closed from the broker
side (CLOSE_PRODUCER / CLOSE_CONSUMER). The client's reconnect then meets the ordinary refusal.

Changes arrive through a metadata watch (so any writer counts); re-checks run in one task at a time, for the
tenants changed since the last run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from magnetar import protocol as proto
from magnetar.broker.authorization import AuthAction, AuthorizationService
from magnetar.broker.names import TopicName
from magnetar.resources import MetadataResources
from magnetar.server.binary.session import Session

log = logging.getLogger("magnetar.server.auth")


class PermissionWatcher:
    def __init__(self, authz: AuthorizationService,
                 connections: Callable[[], Iterable[Session]]) -> None:
        self.authz = authz
        self._connections = connections
        self._tenants: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._unwatch: Callable[[], None] | None = None
        self.closed_clients = 0

    def start(self, resources: MetadataResources) -> None:
        loop = asyncio.get_running_loop()

        def on_write(tenant: str) -> None:
            loop.call_soon(self._changed, tenant)  # after the writer's turn, never inside its write

        self._unwatch = resources.tenants.watch(on_write)

    def _changed(self, tenant: str) -> None:
        self._tenants.add(tenant)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._tenants:
            tenants, self._tenants = self._tenants, set()
            for conn in list(self._connections()):
                if conn.is_open:
                    await self._recheck(conn, tenants)

    async def _recheck(self, conn: Session, tenants: set[str]) -> None:
        role = conn.auth.role
        for producer in list(conn.producers.values()):
            name = TopicName.parse(producer.topic_name)
            if name.tenant in tenants and not await self.authz.allowed(name, role, AuthAction.PRODUCE):
                await producer.wait_pending()  # sends already accepted are answered first
                await conn.detach_producer(producer)
                conn.send_frame(proto.encode_command(proto.commands.close_producer(producer.producer_id, -1)))
                self._closed(conn, "producer", name, role)
        for consumer in list(conn.consumers.values()):
            name = TopicName.parse(consumer.topic_name)
            allowed = await self.authz.allowed(name, role, AuthAction.CONSUME, consumer.subscription_name)
            if name.tenant in tenants and not allowed:
                conn.send_frame(proto.encode_command(proto.commands.close_consumer(consumer.consumer_id, -1)))
                await conn.detach_consumer(consumer)
                self._closed(conn, "consumer", name, role)

    def _closed(self, conn: Session, what: str, topic: TopicName, role: str | None) -> None:
        self.closed_clients += 1
        log.info("closed %s of role %r on %s from %s: permission revoked", what, role, topic, conn.remote_address)

    async def stop(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
