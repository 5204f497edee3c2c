"""The schema registry: schemas per topic with versions, compatibility strategies per namespace, and the
checks producers and consumers go through (Pulsar's ``SchemaRegistryService``).

``types`` names schema types and strategies, ``compat`` decides compatibility (Avro and JSON through the
``avro`` library's reader/writer resolution), ``registry`` stores versions in the metadata store and applies
the namespace policies. Nothing here knows the wire or HTTP.
"""

from magnetar.broker.schema.compat import is_compatible
from magnetar.broker.schema.registry import SchemaRegistry, schema_id
from magnetar.broker.schema.types import SchemaInfo, StoredSchema, Strategy, type_name, type_number, version_bytes

__all__ = [
    "SchemaInfo",
    "SchemaRegistry",
    "StoredSchema",
    "Strategy",
    "is_compatible",
    "schema_id",
    "type_name",
    "type_number",
    "version_bytes",
]
