"""magnetar: a message broker that speaks Apache Pulsar's binary protocol."""

__version__ = "0.1.0"
