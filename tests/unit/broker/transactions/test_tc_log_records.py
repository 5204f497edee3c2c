"""The coordinator log's records: Pulsar's TransactionMetadataEntry fields, round trip and bad bytes."""

from __future__ import annotations

import pytest

from magnetar.broker.transactions.api import TxnId
from magnetar.broker.transactions.states import TxnStatus
from magnetar.broker.transactions.txn_log import Op, TxnLogCorrupted, TxnLogRecord, decode, encode, log_topic
from magnetar.protocol.proto import TransactionLog_pb2 as logpb


def test_records_round_trip() -> None:
    records = [
        TxnLogRecord(op=Op.NEW, txn=TxnId(3, 2**40), new=TxnStatus.OPEN, timeout_ms=60_000,
                     start_time_ms=1_700_000_000_000, modified_ms=1_700_000_000_000),
        TxnLogRecord(op=Op.ADD_PARTITION, txn=TxnId(0, 1), partitions=("persistent://a/b/c", "persistent://a/b/d")),
        TxnLogRecord(op=Op.ADD_SUBSCRIPTION, txn=TxnId(0, 1), subscriptions=(("persistent://a/b/c", "s"),)),
        TxnLogRecord(op=Op.UPDATE, txn=TxnId(0, 1), expected=TxnStatus.COMMITTING, new=TxnStatus.COMMITTED,
                     modified_ms=5),
    ]
    for record in records:
        assert decode(encode(record)) == record


def test_pulsar_field_numbers() -> None:
    fields = {f.name: f.number for f in logpb.TransactionMetadataEntry.DESCRIPTOR.fields}
    assert fields["metadata_op"] == 1 and fields["txnid_least_bits"] == 2 and fields["txnid_most_bits"] == 3
    assert fields["new_status"] == 5 and fields["partitions"] == 6 and fields["subscriptions"] == 7
    entry = logpb.TransactionMetadataEntry.FromString(encode(TxnLogRecord(op=Op.NEW, txn=TxnId(0, 9))))
    assert entry.max_local_txn_id == 9  # the id allocator's high mark travels with each NEW


@pytest.mark.parametrize("data", [b"\xff\xff\xff", b"\x08\x09", b"\x10\x05", b""])
def test_bad_bytes_are_refused(data: bytes) -> None:
    with pytest.raises(TxnLogCorrupted):
        decode(data)


def test_log_topic_name() -> None:
    assert log_topic(4).managed_ledger_name == "pulsar/system/persistent/__transaction_log_4"
