"""The client's exception tree, and the registry that maps wire ``ServerError`` codes onto it.

    PulsarClientError                     root of everything magnetar.client raises
    ├── ServerError                       the broker answered ERROR / SEND_ERROR / a failed lookup
    │   ├── UnknownError (0)              ├── TopicTerminated (15)
    │   ├── BrokerMetadataError (1)       ├── ProducerBusy (16)
    │   ├── BrokerPersistenceError (2)    ├── InvalidTopicNameError (17)
    │   ├── AuthenticationError (3)       ├── IncompatibleSchema (18)
    │   ├── AuthorizationError (4)        ├── ConsumerAssignError (19)
    │   ├── ConsumerBusy (5)              ├── TransactionCoordinatorNotFound (20)
    │   ├── ServiceNotReady (6)           ├── InvalidTxnStatus (21)
    │   ├── ProducerBlockedQuotaExceeded (7, 8)
    │   ├── ChecksumError (9)             ├── NotAllowedError (22)
    │   ├── UnsupportedVersionError (10)  ├── TransactionConflict (23)
    │   ├── TopicNotFound (11)            ├── TransactionNotFound (24)
    │   ├── SubscriptionNotFound (12)     └── ProducerFenced (25)
    │   ├── ConsumerNotFound (13)
    │   └── TooManyRequests (14)
    ├── ConnectError                      TCP connect or handshake failed
    ├── ConnectionClosed                  the connection dropped while a request was in flight
    ├── OperationTimeout                  no answer within ``operation_timeout_ms`` / ``send_timeout_ms``
    ├── AlreadyClosed                     the client, producer or consumer is closed
    ├── ProducerQueueIsFull               ``max_pending_messages`` sends in flight and no blocking asked for
    ├── MessageTooBig                     larger than the broker's max_message_size, chunking off
    ├── CumulativeAckNotAllowed           cumulative ack on a Shared / Key_Shared subscription
    ├── InvalidConfiguration              bad options, bad topic names
    └── LookupError_                      too many lookup redirects, or a lookup answer without a URL

``retriable`` says whether creating a producer/consumer (or reconnecting) should keep trying on
this error until the operation timeout, as the reference client does; fatal ones are raised at once.
``retriable`` and ``lookup_again`` of a ServerError come from the protocol's one registry of wire codes
(:class:`~magnetar.protocol.server_errors.ServerErrorCode`); this module only names the exceptions.
Knows nothing of connections: ``from_server`` turns (code, message) into an exception.
"""

from __future__ import annotations

from typing import ClassVar

from magnetar.protocol.server_errors import ServerErrorCode as _Code

__all__ = [
    "AlreadyClosed",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerMetadataError",
    "BrokerPersistenceError",
    "ChecksumError",
    "ConnectError",
    "ConnectionClosed",
    "ConsumerAssignError",
    "ConsumerBusy",
    "ConsumerNotFound",
    "CumulativeAckNotAllowed",
    "IncompatibleSchema",
    "InvalidConfiguration",
    "InvalidTopicNameError",
    "InvalidTxnStatus",
    "LookupError_",
    "MessageTooBig",
    "NotAllowedError",
    "OperationTimeout",
    "ProducerBlockedQuotaExceeded",
    "ProducerBusy",
    "ProducerFenced",
    "ProducerQueueIsFull",
    "PulsarClientError",
    "ServerError",
    "ServiceNotReady",
    "SubscriptionNotFound",
    "TooManyRequests",
    "TopicNotFound",
    "TopicTerminated",
    "TransactionConflict",
    "TransactionCoordinatorNotFound",
    "TransactionNotFound",
    "UnknownError",
    "UnsupportedVersionError",
    "from_server",
    "is_retriable",
]


class PulsarClientError(Exception):
    """Root of every error raised by magnetar.client."""

    retriable: ClassVar[bool] = False


class ServerError(PulsarClientError):
    """The broker reported an error; ``code`` is the wire ServerError value."""

    code: ClassVar[int] = 0
    lookup_again: ClassVar[bool] = False  # the topic may be served elsewhere: look it up before retrying

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        super().__init__(message)
        self.server_message = message
        self.wire_code = self.code if code is None else code


class ConnectError(PulsarClientError):
    retriable = True


class ConnectionClosed(PulsarClientError):
    retriable = True


class OperationTimeout(PulsarClientError):
    pass


class AlreadyClosed(PulsarClientError):
    pass


class ProducerQueueIsFull(PulsarClientError):
    pass


class MessageTooBig(PulsarClientError):
    pass


class CumulativeAckNotAllowed(PulsarClientError):
    pass


class InvalidConfiguration(PulsarClientError, ValueError):
    pass


class LookupError_(PulsarClientError):  # the builtin LookupError is a different thing
    pass


_REGISTRY: dict[int, type[ServerError]] = {}


def _server_error(name: str, code: _Code) -> type[ServerError]:
    attributes = {"code": code, "retriable": code.retriable, "lookup_again": code.lookup_again, "__module__": __name__}
    cls = type(name, (ServerError,), attributes)
    _REGISTRY.setdefault(code, cls)
    return cls


UnknownError = _server_error("UnknownError", _Code.UnknownError)
BrokerMetadataError = _server_error("BrokerMetadataError", _Code.MetadataError)
BrokerPersistenceError = _server_error("BrokerPersistenceError", _Code.PersistenceError)
AuthenticationError = _server_error("AuthenticationError", _Code.AuthenticationError)
AuthorizationError = _server_error("AuthorizationError", _Code.AuthorizationError)
ConsumerBusy = _server_error("ConsumerBusy", _Code.ConsumerBusy)
ServiceNotReady = _server_error("ServiceNotReady", _Code.ServiceNotReady)
ProducerBlockedQuotaExceeded = _server_error("ProducerBlockedQuotaExceeded", _Code.ProducerBlockedQuotaExceededError)
_REGISTRY[_Code.ProducerBlockedQuotaExceededException] = ProducerBlockedQuotaExceeded
ChecksumError = _server_error("ChecksumError", _Code.ChecksumError)
UnsupportedVersionError = _server_error("UnsupportedVersionError", _Code.UnsupportedVersionError)
TopicNotFound = _server_error("TopicNotFound", _Code.TopicNotFound)
SubscriptionNotFound = _server_error("SubscriptionNotFound", _Code.SubscriptionNotFound)
ConsumerNotFound = _server_error("ConsumerNotFound", _Code.ConsumerNotFound)
TooManyRequests = _server_error("TooManyRequests", _Code.TooManyRequests)
TopicTerminated = _server_error("TopicTerminated", _Code.TopicTerminatedError)
ProducerBusy = _server_error("ProducerBusy", _Code.ProducerBusy)
InvalidTopicNameError = _server_error("InvalidTopicNameError", _Code.InvalidTopicName)
IncompatibleSchema = _server_error("IncompatibleSchema", _Code.IncompatibleSchema)
ConsumerAssignError = _server_error("ConsumerAssignError", _Code.ConsumerAssignError)
TransactionCoordinatorNotFound = _server_error("TransactionCoordinatorNotFound", _Code.TransactionCoordinatorNotFound)
InvalidTxnStatus = _server_error("InvalidTxnStatus", _Code.InvalidTxnStatus)
NotAllowedError = _server_error("NotAllowedError", _Code.NotAllowedError)
TransactionConflict = _server_error("TransactionConflict", _Code.TransactionConflict)
TransactionNotFound = _server_error("TransactionNotFound", _Code.TransactionNotFound)
ProducerFenced = _server_error("ProducerFenced", _Code.ProducerFenced)


def from_server(code: int, message: str) -> ServerError:
    """The exception for a wire ServerError code; unknown codes become ``UnknownError``."""
    cls = _REGISTRY.get(code, UnknownError)
    return cls(message, code=code)


def is_retriable(exc: BaseException) -> bool:
    """Whether creation/reconnection should keep trying after ``exc``."""
    return isinstance(exc, PulsarClientError) and exc.retriable
