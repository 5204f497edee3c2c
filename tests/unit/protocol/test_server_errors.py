"""The one registry of wire error codes agrees with the schema, and both ends map through it."""

from __future__ import annotations

import pytest

from magnetar.broker import errors as broker_errors
from magnetar.broker.policies import quota
from magnetar.broker.transactions import api as txn_api
from magnetar.client import errors as client_errors
from magnetar.protocol import commands, encode_command
from magnetar.protocol.proto import PulsarApi_pb2 as pb
from magnetar.protocol.server_errors import ServerErrorCode


def test_the_registry_is_the_schemas_enum() -> None:
    assert {code.name: int(code) for code in ServerErrorCode} == dict(pb.ServerError.items())


def test_a_code_is_its_wire_value() -> None:
    code = ServerErrorCode.TopicNotFound
    assert (code == 11, str(code), f"{code}") == (True, "11", "11")  # messages and logs print the number
    as_enum = encode_command(commands.error(7, ServerErrorCode.NotAllowedError, "no"))
    assert as_enum == encode_command(commands.error(7, pb.NotAllowedError, "no"))


def test_only_service_not_ready_sends_the_client_back_to_lookup() -> None:
    assert [c for c in ServerErrorCode if c.lookup_again] == [ServerErrorCode.ServiceNotReady]
    assert ServerErrorCode.ServiceNotReady.retriable and not ServerErrorCode.ProducerFenced.retriable


@pytest.mark.parametrize("code", list(ServerErrorCode))
def test_the_client_maps_every_code_through_the_registry(code: ServerErrorCode) -> None:
    exc = client_errors.from_server(int(code), "m")
    assert (exc.wire_code, exc.retriable, exc.lookup_again) == (code, code.retriable, code.lookup_again)
    assert client_errors.is_retriable(exc) is code.retriable


def test_unknown_codes_become_unknown_error() -> None:
    exc = client_errors.from_server(99, "m")
    assert type(exc) is client_errors.UnknownError and exc.wire_code == 99


def _subclasses(root: type) -> list[type]:
    found = []
    for sub in root.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_every_broker_error_carries_a_registered_code() -> None:
    assert quota.ProducerBlockedQuotaExceededError in _subclasses(broker_errors.BrokerError)
    assert txn_api.InvalidTxnStatus in _subclasses(broker_errors.BrokerError)
    for cls in _subclasses(broker_errors.BrokerError):
        assert isinstance(cls.server_error, ServerErrorCode), cls
