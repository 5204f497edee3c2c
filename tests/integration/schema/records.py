"""A record class for ``magnetar admin schemas extract -c tests.integration.schema.records:Order``."""

from pulsar.schema import Float, Record, String


class Order(Record):  # type: ignore[misc]
    item = String(required_default=True)
    price = Float(required_default=True)
