"""``PulsarDataSource``: the ``pulsar`` format for ``spark.read``, ``readStream``, ``write`` and
``writeStream``. It only parses options and hands out the reader and writer objects; the work lives
in ``reader`` and ``writer``. Pickled to the planner and executors as its options alone.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from magnetar.spark.options import parse_sink, parse_source
from magnetar.spark.reader import PulsarBatchReader, PulsarStreamReader
from magnetar.spark.schema import SOURCE_DDL
from magnetar.spark.writer import PulsarBatchWriter, PulsarStreamWriter, check_sink_schema

__all__ = ["PulsarDataSource"]


class PulsarDataSource(DataSource):
    """``spark.read.format("pulsar").option("service.url", ...).option("topic", ...).load()``"""

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def schema(self) -> str:
        return SOURCE_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return PulsarBatchReader(parse_source(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PulsarStreamReader(parse_source(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = parse_sink(self.options)
        check_sink_schema(schema, opts)
        return PulsarBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = parse_sink(self.options)
        check_sink_schema(schema, opts)
        return PulsarStreamWriter(opts)
