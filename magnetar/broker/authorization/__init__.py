"""Authorization: who may produce, consume, look up and administer what (Pulsar's
``PulsarAuthorizationProvider``): super-user roles, tenant ``adminRoles``, and the ``auth_policies`` of a
namespace (namespace, topic and subscription permissions). Pure logic over the metadata store; it knows
nothing of how a role was authenticated (``magnetar.server.auth`` does that).
"""

from magnetar.broker.authorization.policies import AuthAction, AuthPolicies, parse_actions
from magnetar.broker.authorization.service import AuthorizationService

__all__ = ["AuthAction", "AuthPolicies", "AuthorizationService", "parse_actions"]
