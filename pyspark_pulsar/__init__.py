"""Spark auto-registers a Python data source from a top-level ``pyspark_<name>`` module exposing
``DefaultSource``: this one makes ``format("pulsar")`` work with no ``spark.dataSource.register``."""

from magnetar.spark.source import PulsarDataSource as DefaultSource

__all__ = ["DefaultSource"]
