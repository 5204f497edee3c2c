"""The storage agreement state machine with the object store on a real S3 API (a moto server process):
the embedded store, the object store and the in-memory store must agree exactly on the same random steps."""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from magnetar.storage.objectstore import ObjectClient
from tests.component.storage.conftest import s3_client
from tests.s3_server import MotoServer
from tests.unit.storage.test_agreement import LedgerAgreement


def test_the_object_store_on_s3_agrees_with_the_others(moto: MotoServer, bucket: str) -> None:
    endpoint = moto.endpoint

    class OnS3(LedgerAgreement):
        def object_client(self) -> ObjectClient:
            return s3_client(endpoint, bucket)

    examples = int(os.environ.get("MAGNETAR_S3_AGREEMENT_EXAMPLES", "25"))
    run_state_machine_as_test(OnS3, settings=settings(max_examples=examples, stateful_step_count=30, deadline=None))
