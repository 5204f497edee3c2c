"""The broker's errors, each carrying the wire error code the client maps (facts §4.7).

Every error a client can cause or see is a :class:`BrokerError` with a ``server_error`` code (a member of the
protocol's one registry, :class:`~magnetar.protocol.server_errors.ServerErrorCode`); the
server turns it into an ERROR or SEND_ERROR frame. Errors from the layers below are translated where
they meet the broker (``raise PersistenceError(...) from exc``).

    BrokerError (UnknownError)
    ├── MetadataError, PersistenceError, ServiceNotReady          retried by the client
    ├── AuthenticationError, AuthorizationError                    fatal for the client (HTTP 401 / 403)
    ├── ConsumerBusy, ProducerBusy, ProducerFenced, TopicNotFound  fatal for the client
    ├── SubscriptionNotFound, ConsumerNotFound, InvalidTopicName, TooManyRequests
    ├── NotAllowed, TopicTerminated, ChecksumError, IncompatibleSchema
    ├── ...
    └── AdminError: NotFound, Conflict, PreconditionFailed, InvalidRequest, NotAcceptable, MethodNotAllowed
"""

from __future__ import annotations

from typing import ClassVar

from magnetar.protocol.server_errors import ServerErrorCode as _E


class BrokerError(Exception):
    server_error: ClassVar[_E] = _E.UnknownError


class MetadataError(BrokerError):
    server_error = _E.MetadataError


class PersistenceError(BrokerError):
    server_error = _E.PersistenceError


class AuthenticationError(BrokerError):
    """Missing or bad credentials (wire AuthenticationError, HTTP 401). The message never holds a secret."""

    server_error = _E.AuthenticationError


class AuthorizationError(BrokerError):
    """The authenticated role may not do this (wire AuthorizationError, HTTP 403)."""

    server_error = _E.AuthorizationError


class ConsumerBusy(BrokerError):
    server_error = _E.ConsumerBusy


class ServiceNotReady(BrokerError):
    server_error = _E.ServiceNotReady


class ChecksumError(BrokerError):
    server_error = _E.ChecksumError


class TopicNotFound(BrokerError):
    server_error = _E.TopicNotFound


class SubscriptionNotFound(BrokerError):
    server_error = _E.SubscriptionNotFound


class ConsumerNotFound(BrokerError):
    server_error = _E.ConsumerNotFound


class TooManyRequests(BrokerError):
    """More requests in flight on a connection than it accepts; the official clients retry it."""

    server_error = _E.TooManyRequests


class TopicTerminated(BrokerError):
    server_error = _E.TopicTerminatedError


class ProducerBusy(BrokerError):
    server_error = _E.ProducerBusy


class InvalidTopicName(BrokerError):
    server_error = _E.InvalidTopicName


class IncompatibleSchema(BrokerError):
    server_error = _E.IncompatibleSchema


class ConsumerAssignError(BrokerError):
    server_error = _E.ConsumerAssignError


class NotAllowed(BrokerError):
    server_error = _E.NotAllowedError


class TopicQuotaExceeded(NotAllowed):
    """maxTopicsPerNamespace reached: NotAllowedError on the wire, 412 in the admin API (as Pulsar)."""


class ProducerFenced(BrokerError):
    server_error = _E.ProducerFenced


# ---- admin operations (no wire code of their own; the HTTP layer maps them to Pulsar's statuses) ----------


class AdminError(BrokerError):
    """An admin request the broker refuses: the server answers with a status and ``{"reason": ...}``."""


class NotFound(AdminError):
    """Unknown tenant, namespace, cluster, topic or subscription (HTTP 404)."""


class Conflict(AdminError):
    """It already exists, or the state forbids it (HTTP 409)."""


class PreconditionFailed(AdminError):
    """Active producers, consumers or subscriptions stand in the way (HTTP 412)."""


class InvalidRequest(AdminError):
    """Bad input: a malformed body, a number out of range (HTTP 400)."""


class NotAcceptable(AdminError):
    """A partition count that is not acceptable (HTTP 406, as Pulsar answers)."""


class MethodNotAllowed(AdminError):
    """The operation does not apply to this kind of topic (HTTP 405), e.g. terminating a partitioned one."""
