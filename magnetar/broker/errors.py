"""The broker's errors, each carrying the wire error code the client maps (facts §4.7).

Every error a client can cause or see is a :class:`BrokerError` with a ``server_error`` code; the
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

# ServerError values from the Pulsar schema (facts §4.7); kept here as plain ints so this module does
# not depend on generated code.
UNKNOWN_ERROR = 0
METADATA_ERROR = 1
PERSISTENCE_ERROR = 2
AUTHENTICATION_ERROR = 3
AUTHORIZATION_ERROR = 4
CONSUMER_BUSY = 5
SERVICE_NOT_READY = 6
CHECKSUM_ERROR = 9
UNSUPPORTED_VERSION = 10
TOPIC_NOT_FOUND = 11
SUBSCRIPTION_NOT_FOUND = 12
CONSUMER_NOT_FOUND = 13
TOO_MANY_REQUESTS = 14
TOPIC_TERMINATED = 15
PRODUCER_BUSY = 16
INVALID_TOPIC_NAME = 17
INCOMPATIBLE_SCHEMA = 18
CONSUMER_ASSIGN_ERROR = 19
NOT_ALLOWED = 22
PRODUCER_FENCED = 25


class BrokerError(Exception):
    server_error: ClassVar[int] = UNKNOWN_ERROR


class MetadataError(BrokerError):
    server_error = METADATA_ERROR


class PersistenceError(BrokerError):
    server_error = PERSISTENCE_ERROR


class AuthenticationError(BrokerError):
    """Missing or bad credentials (wire AuthenticationError, HTTP 401). The message never holds a secret."""

    server_error = AUTHENTICATION_ERROR


class AuthorizationError(BrokerError):
    """The authenticated role may not do this (wire AuthorizationError, HTTP 403)."""

    server_error = AUTHORIZATION_ERROR


class ConsumerBusy(BrokerError):
    server_error = CONSUMER_BUSY


class ServiceNotReady(BrokerError):
    server_error = SERVICE_NOT_READY


class ChecksumError(BrokerError):
    server_error = CHECKSUM_ERROR


class TopicNotFound(BrokerError):
    server_error = TOPIC_NOT_FOUND


class SubscriptionNotFound(BrokerError):
    server_error = SUBSCRIPTION_NOT_FOUND


class ConsumerNotFound(BrokerError):
    server_error = CONSUMER_NOT_FOUND


class TooManyRequests(BrokerError):
    """More requests in flight on a connection than it accepts; the official clients retry it."""

    server_error = TOO_MANY_REQUESTS


class TopicTerminated(BrokerError):
    server_error = TOPIC_TERMINATED


class ProducerBusy(BrokerError):
    server_error = PRODUCER_BUSY


class InvalidTopicName(BrokerError):
    server_error = INVALID_TOPIC_NAME


class IncompatibleSchema(BrokerError):
    server_error = INCOMPATIBLE_SCHEMA


class ConsumerAssignError(BrokerError):
    server_error = CONSUMER_ASSIGN_ERROR


class NotAllowed(BrokerError):
    server_error = NOT_ALLOWED


class TopicQuotaExceeded(NotAllowed):
    """maxTopicsPerNamespace reached: NotAllowedError on the wire, 412 in the admin API (as Pulsar)."""


class ProducerFenced(BrokerError):
    server_error = PRODUCER_FENCED


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
