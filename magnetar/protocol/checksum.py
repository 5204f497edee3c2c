"""CRC-32C (Castagnoli), the checksum Pulsar puts in front of message metadata and payload.

Owns only the arithmetic, delegated to the C-backed ``crc32c`` package (hardware accelerated
where the CPU allows). Knows nothing of frames or entries; ``entry.py`` decides what is covered.
"""

from __future__ import annotations

import crc32c as _crc32c

__all__ = ["crc32c"]


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """Return the CRC-32C of ``data``, continuing from ``value`` (a previous result) when given."""
    result: int = _crc32c.crc32c(data, value)
    return result
