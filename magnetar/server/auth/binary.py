"""Authentication and authorization on one binary-protocol connection.

CONNECT is authenticated by the provider its ``auth_method_name`` names; a failure is answered with
ERROR(AuthenticationError, "Unable to authenticate") and the connection closes, as Pulsar does. When the
credentials expire (a token's ``exp``), a check every ``authenticationRefreshCheckSeconds`` sends
AUTH_CHALLENGE with the refresh marker; the client answers AUTH_RESPONSE with fresh credentials for the
same role, or the connection is closed at the next check (also when the client cannot refresh).
PRODUCER, SUBSCRIBE (and readers), LOOKUP, PARTITIONED_METADATA and GET_TOPICS_OF_NAMESPACE ask
:meth:`ConnectionAuth.require`.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Protocol

from magnetar import protocol as proto
from magnetar.broker.authorization import AuthAction
from magnetar.broker.errors import AuthenticationError, AuthorizationError
from magnetar.broker.names import NamespaceName, TopicName
from magnetar.server.auth.context import SecurityContext
from magnetar.server.auth.provider import Credentials, Identity
from magnetar.server.auth.service import CONNECT_FAILURE_MESSAGE
from magnetar.server.auth.tls import peer_certificate

log = logging.getLogger("magnetar.server.auth")

REFRESH_MARKER = b"PulsarAuthRefresh"
NO_REQUEST_ID = 2**64 - 1  # Pulsar answers a refused CONNECT with request id -1


class AuthPeer(Protocol):
    """What authentication needs of a binary connection (the server's connection has it)."""

    @property
    def remote_address(self) -> str: ...

    @property
    def protocol_version(self) -> int: ...

    @property
    def is_open(self) -> bool: ...

    def send_frame(self, frame: bytes) -> None: ...

    async def close(self) -> None: ...


class AuthenticationRefused(proto.PeerProtocolError):
    """CONNECT with bad credentials: the ERROR has been queued, the connection closes."""


class ConnectionAuth:
    def __init__(self, security: SecurityContext | None, ssl_object: ssl.SSLObject | None) -> None:
        self.security = security or SecurityContext()
        self.tls = ssl_object is not None
        self._peer_certificate = peer_certificate(ssl_object)
        self.identity: Identity | None = None
        self._supports_refresh = False
        self._refresh_pending = False
        self._task: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None

    @property
    def role(self) -> str | None:
        return self.identity.role if self.identity is not None else None

    # ---- authentication --------------------------------------------------------------------------------

    def on_connect(self, conn: AuthPeer, c: proto.pb.CommandConnect) -> None:
        authn = self.security.authn
        if authn is None:
            return
        method = c.auth_method_name if c.HasField("auth_method_name") else ""
        data = c.auth_data if c.HasField("auth_data") else None
        try:
            self.identity = authn.authenticate(method, Credentials(data, self._peer_certificate), conn.remote_address)
        except AuthenticationError as exc:
            error = proto.commands.error(
                NO_REQUEST_ID, proto.ServerErrorCode.AuthenticationError, CONNECT_FAILURE_MESSAGE)
            conn.send_frame(proto.encode_command(error))
            raise AuthenticationRefused(f"authentication failed: {exc}") from None
        self._supports_refresh = c.feature_flags.supports_auth_refresh
        interval_s = self.security.settings.authentication_refresh_check_seconds
        if self.identity.expires_at_ms is not None and interval_s > 0:
            self._task = asyncio.get_running_loop().create_task(self._refresh_loop(conn, interval_s))

    async def _refresh_loop(self, conn: AuthPeer, interval_s: float) -> None:
        while conn.is_open:
            await asyncio.sleep(interval_s)
            identity = self.identity
            if identity is None or identity.expires_at_ms is None or self.security.now_ms() < identity.expires_at_ms:
                continue
            if self._refresh_pending or not self._supports_refresh:
                why = "did not refresh them" if self._refresh_pending else "cannot refresh them"
                log.info("closing connection from %s: credentials of role %r expired and the client %s",
                         conn.remote_address, identity.role, why)
                self._close(conn)
                return
            self._refresh_pending = True
            challenge = proto.pb.BaseCommand(type=proto.pb.BaseCommand.AUTH_CHALLENGE)
            challenge.authChallenge.server_version = "magnetar"
            challenge.authChallenge.protocol_version = conn.protocol_version
            challenge.authChallenge.challenge.auth_method_name = identity.method
            challenge.authChallenge.challenge.auth_data = REFRESH_MARKER
            conn.send_frame(proto.encode_command(challenge))

    def on_auth_response(self, conn: AuthPeer, r: proto.pb.CommandAuthResponse) -> None:
        authn, old = self.security.authn, self.identity
        if authn is None or old is None:
            return
        method = r.response.auth_method_name or old.method
        try:
            fresh = authn.authenticate(method, Credentials(r.response.auth_data, self._peer_certificate),
                                       conn.remote_address)
        except AuthenticationError:
            log.info("closing connection from %s: refreshed credentials of role %r refused",
                     conn.remote_address, old.role)
            self._close(conn)
            return
        if fresh.role != old.role:
            log.warning("closing connection from %s: the role cannot change on refresh (%r -> %r)",
                        conn.remote_address, old.role, fresh.role)
            self._close(conn)
            return
        self.identity = fresh
        self._refresh_pending = False
        log.info("authentication refreshed for role %r from %s", fresh.role, conn.remote_address)

    def _close(self, conn: AuthPeer) -> None:
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(conn.close())

    def close(self) -> None:
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    # ---- authorization -----------------------------------------------------------------------------------

    async def require(self, topic: TopicName, action: AuthAction, subscription: str | None = None) -> None:
        """AuthorizationError unless this connection's role may do ``action`` on ``topic``."""
        authz = self.security.authz
        if authz is not None:
            await authz.check(topic, self.role, action, subscription)

    def is_super_user(self) -> bool:
        """True when authorization is off, or this connection's role is a super-user."""
        authz = self.security.authz
        return authz is None or authz.is_super_user(self.role)

    async def require_lookup(self, topic: TopicName, what: str = "Lookup") -> None:
        authz = self.security.authz
        if authz is not None:
            await authz.check_lookup(topic, self.role, what)

    async def require_namespace(self, ns: NamespaceName) -> None:
        """Listing a namespace's topics: a tenant admin, or a role holding any permission in the namespace."""
        authz = self.security.authz
        if authz is None or await authz.is_tenant_admin(ns.tenant, self.role):
            return
        grants = (await authz.auth_policies(ns)).namespace_auth
        if self.role is None or not grants.get(self.role):
            raise AuthorizationError("Client is not authorized to GetTopicsOfNamespace")

    # ---- listeners -----------------------------------------------------------------------------------------

    def lookup_urls(self, host: str, local_port: int) -> tuple[str, str | None]:
        """(brokerServiceUrl, brokerServiceUrlTls) for a lookup that reached ``host:local_port``."""
        plain_port, tls_port = self.security.broker_port, self.security.broker_port_tls
        if self.tls:
            tls_url = f"pulsar+ssl://{host}:{local_port}"
            return (f"pulsar://{host}:{plain_port}" if plain_port is not None else tls_url), tls_url
        return f"pulsar://{host}:{local_port}", (f"pulsar+ssl://{host}:{tls_port}" if tls_port is not None else None)
