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
Knows nothing of connections: ``from_server`` turns (code, message) into an exception.
"""

from __future__ import annotations

from typing import ClassVar

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


def _server_error(name: str, code: int, *, retriable: bool) -> type[ServerError]:
    cls = type(name, (ServerError,), {"code": code, "retriable": retriable, "__module__": __name__})
    _REGISTRY.setdefault(code, cls)
    return cls


UnknownError = _server_error("UnknownError", 0, retriable=True)
BrokerMetadataError = _server_error("BrokerMetadataError", 1, retriable=True)
BrokerPersistenceError = _server_error("BrokerPersistenceError", 2, retriable=True)
AuthenticationError = _server_error("AuthenticationError", 3, retriable=False)
AuthorizationError = _server_error("AuthorizationError", 4, retriable=False)
ConsumerBusy = _server_error("ConsumerBusy", 5, retriable=False)
ServiceNotReady = _server_error("ServiceNotReady", 6, retriable=True)
ProducerBlockedQuotaExceeded = _server_error("ProducerBlockedQuotaExceeded", 7, retriable=False)
_REGISTRY[8] = ProducerBlockedQuotaExceeded
ChecksumError = _server_error("ChecksumError", 9, retriable=False)
UnsupportedVersionError = _server_error("UnsupportedVersionError", 10, retriable=True)
TopicNotFound = _server_error("TopicNotFound", 11, retriable=False)
SubscriptionNotFound = _server_error("SubscriptionNotFound", 12, retriable=True)
ConsumerNotFound = _server_error("ConsumerNotFound", 13, retriable=True)
TooManyRequests = _server_error("TooManyRequests", 14, retriable=False)
TopicTerminated = _server_error("TopicTerminated", 15, retriable=False)
ProducerBusy = _server_error("ProducerBusy", 16, retriable=False)
InvalidTopicNameError = _server_error("InvalidTopicNameError", 17, retriable=False)
IncompatibleSchema = _server_error("IncompatibleSchema", 18, retriable=False)
ConsumerAssignError = _server_error("ConsumerAssignError", 19, retriable=False)
TransactionCoordinatorNotFound = _server_error("TransactionCoordinatorNotFound", 20, retriable=True)
InvalidTxnStatus = _server_error("InvalidTxnStatus", 21, retriable=True)
NotAllowedError = _server_error("NotAllowedError", 22, retriable=False)
TransactionConflict = _server_error("TransactionConflict", 23, retriable=True)
TransactionNotFound = _server_error("TransactionNotFound", 24, retriable=True)
ProducerFenced = _server_error("ProducerFenced", 25, retriable=False)


def from_server(code: int, message: str) -> ServerError:
    """The exception for a wire ServerError code; unknown codes become ``UnknownError``."""
    cls = _REGISTRY.get(code, UnknownError)
    return cls(message, code=code)


def is_retriable(exc: BaseException) -> bool:
    """Whether creation/reconnection should keep trying after ``exc``."""
    return isinstance(exc, PulsarClientError) and exc.retriable
