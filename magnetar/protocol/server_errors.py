"""The one registry of the wire's ``ServerError`` codes: name, code, retriable, "look up again".

Every error the broker reports in ERROR, SEND_ERROR, a failed lookup or a transaction response carries one of
these codes, and every code the client receives is mapped through them: the broker's errors
(``broker/errors.py``) name their code here, the client's exception registry (``client/errors.py``) is built
from this table, and nothing else spells a code as a number.

- ``name`` and the value are PulsarApi.proto's (a unit test checks the table against the generated enum).
- ``retriable``: creating a producer or consumer (or reconnecting one) keeps trying after this error until
  the operation timeout, as the official client does (facts §4.7); a fatal one is raised to the application
  at once. One deliberate difference: the C++ client retries ``InvalidTopicName`` (a name never becomes
  valid); magnetar's client does not.
- ``lookup_again``: the topic may be served elsewhere now (the broker answers ``ServiceNotReady`` for a topic
  it does not own or is unloading, "Please redo the lookup"): the client looks the topic up again before it
  retries, rather than retrying on the same connection.

An ``IntEnum``, so a member is the wire value itself (protobuf fields take it as is, the bytes are unchanged).
Pure data: no I/O.
"""

from __future__ import annotations

import enum

__all__ = ["ServerErrorCode"]


class ServerErrorCode(enum.IntEnum):
    """``ServerError`` (PulsarApi.proto): ``Name = code, retriable, lookup_again``."""

    retriable: bool
    lookup_again: bool

    def __new__(cls, code: int, retriable: bool, lookup_again: bool) -> ServerErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.retriable = retriable
        member.lookup_again = lookup_again
        return member

    UnknownError = 0, True, False
    MetadataError = 1, True, False
    PersistenceError = 2, True, False
    AuthenticationError = 3, False, False
    AuthorizationError = 4, False, False
    ConsumerBusy = 5, False, False
    ServiceNotReady = 6, True, True  # not served here (now): the client looks the topic up again
    ProducerBlockedQuotaExceededError = 7, False, False
    ProducerBlockedQuotaExceededException = 8, False, False
    ChecksumError = 9, False, False
    UnsupportedVersionError = 10, True, False
    TopicNotFound = 11, False, False
    SubscriptionNotFound = 12, True, False
    ConsumerNotFound = 13, True, False
    TooManyRequests = 14, False, False  # the official client also closes the connection
    TopicTerminatedError = 15, False, False
    ProducerBusy = 16, False, False
    InvalidTopicName = 17, False, False
    IncompatibleSchema = 18, False, False
    ConsumerAssignError = 19, False, False
    TransactionCoordinatorNotFound = 20, True, False
    InvalidTxnStatus = 21, True, False
    NotAllowedError = 22, False, False
    TransactionConflict = 23, True, False
    TransactionNotFound = 24, True, False
    ProducerFenced = 25, False, False  # permanent: the producer is done
