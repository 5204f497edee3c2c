"""magnetar.spark: the PySpark data source for Pulsar topics (format ``pulsar``).

    spark.dataSource.register(PulsarDataSource)   # or nothing: ``pyspark_pulsar`` auto-registers it
    spark.read.format("pulsar").option("service.url", "pulsar://localhost:6650").option("topic", "t").load()

Modules: ``options`` (option parsing), ``offsets`` (canonical JSON offsets), ``schema`` (columns and
Arrow conversion), ``runtime`` (one event loop and cached clients per process), ``discovery`` and
``planning`` (driver side), ``scan`` (executor side reads with data-loss checks), ``reader``,
``writer``, ``exactly_once`` and ``source`` (Spark's classes), ``export`` (the topic export job).
Talks to brokers only through ``magnetar.client``; never
imports the broker, server, ledger or storage layers.
"""

from magnetar.spark.export import export_topic
from magnetar.spark.source import PulsarDataSource

__all__ = ["PulsarDataSource", "export_topic"]
