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

from magnetar.spark.options import OptionError, parse_sink, parse_source
from magnetar.spark.reader import PulsarBatchReader, PulsarStreamReader
from magnetar.spark.schema import SOURCE_DDL
from magnetar.spark.writer import PulsarBatchWriter, PulsarStreamWriter, check_sink_schema, resolve_guarantee

__all__ = ["OVERWRITE_REFUSED", "PulsarDataSource"]

OVERWRITE_REFUSED = ("a Pulsar topic is append-only: mode('overwrite') would have to delete what consumers may "
                     "already have read, so the pulsar sink refuses it; use .mode('append')")


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
        if overwrite:
            raise OptionError(OVERWRITE_REFUSED)
        opts = parse_sink(self.options)
        check_sink_schema(schema, opts)
        return PulsarBatchWriter(resolve_guarantee(opts))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = parse_sink(self.options)
        check_sink_schema(schema, opts)
        return PulsarStreamWriter(resolve_guarantee(opts))
