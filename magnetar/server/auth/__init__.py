"""Security at the network edges: TLS listeners, authentication providers (token, TLS certificate, basic),
the per-connection authentication state with AUTH_CHALLENGE refresh, and the HTTP middleware that
authenticates and authorizes every admin request. Authorization decisions live in
:mod:`magnetar.broker.authorization`."""

from magnetar.server.auth.binary import ConnectionAuth
from magnetar.server.auth.context import SecurityContext
from magnetar.server.auth.settings import SecuritySettings

__all__ = ["ConnectionAuth", "SecurityContext", "SecuritySettings"]
