"""The connector's columns (``specs/spark.md``) as a Spark DDL string and as an Arrow schema, and the
conversion of received messages into one Arrow ``RecordBatch``.

Readers hand Spark Arrow record batches rather than row tuples (several times faster through the
Python data source bridge). Knows nothing of Spark's classes or of the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pyarrow as pa

from magnetar.client import Message

__all__ = ["ARROW_SCHEMA", "SOURCE_DDL", "to_record_batch"]

SOURCE_DDL: Final = (
    "key BINARY, value BINARY, topic STRING, partition INT, "
    "messageId STRUCT<ledgerId: BIGINT, entryId: BIGINT, batchIndex: INT>, "
    "publishTime TIMESTAMP, eventTime TIMESTAMP, properties MAP<STRING, STRING>"
)

_TS: Final = pa.timestamp("us", tz="UTC")
_MESSAGE_ID: Final = pa.struct([("ledgerId", pa.int64()), ("entryId", pa.int64()), ("batchIndex", pa.int32())])
ARROW_SCHEMA: Final = pa.schema([
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("messageId", _MESSAGE_ID),
    ("publishTime", _TS),
    ("eventTime", _TS),
    ("properties", pa.map_(pa.string(), pa.string())),
])


def _ms_to_ts(values: list[int | None]) -> pa.Array:
    return pa.array([None if v is None else v * 1000 for v in values], _TS)


def to_record_batch(messages: Sequence[Message], topic: str, partition: int) -> pa.RecordBatch:
    """One batch of rows for messages of one (partition) topic."""
    n = len(messages)
    ids = [m.message_id for m in messages]
    message_id = pa.StructArray.from_arrays(
        [
            pa.array([i.ledger_id for i in ids], pa.int64()),
            pa.array([i.entry_id for i in ids], pa.int64()),
            pa.array([i.batch_index for i in ids], pa.int32()),
        ],
        fields=list(_MESSAGE_ID),
    )
    columns = [
        pa.array([None if m.key is None else m.key.encode() for m in messages], pa.binary()),
        pa.array([m.data for m in messages], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        message_id,
        _ms_to_ts([m.publish_time_ms for m in messages]),
        _ms_to_ts([m.event_time_ms or None for m in messages]),
        pa.array([list(m.properties.items()) for m in messages], pa.map_(pa.string(), pa.string())),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
