"""Generated protobuf modules for Pulsar's wire schema (see scripts/gen-proto).

Only the ``.proto`` sources are edited by hand; ``*_pb2.py`` and ``*_pb2.pyi`` are generated.
"""
