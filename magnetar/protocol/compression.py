"""Payload compression for Pulsar's five codecs, byte-compatible with the C++ client.

LZ4 is a raw block without size prefix, ZLIB a zlib stream, ZSTD a standard frame (level 3),
SNAPPY a raw block (not the framing format). Decompression writes into a buffer of exactly the
announced ``uncompressed_size``, refused up front when above ``max_size``, so a compression bomb
cannot allocate more than the caller allows.

Knows nothing of metadata or batches: callers pass the codec and sizes from MessageMetadata.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Final

import cramjam

from magnetar.protocol.errors import CompressionError
from magnetar.protocol.proto import PulsarApi_pb2 as pb

__all__ = ["LZ4", "NONE", "SNAPPY", "ZLIB", "ZSTD", "compress", "decompress"]

NONE: Final = pb.NONE
LZ4: Final = pb.LZ4
ZLIB: Final = pb.ZLIB
ZSTD: Final = pb.ZSTD
SNAPPY: Final = pb.SNAPPY
ZSTD_LEVEL: Final = 3
_NAMES: Final[dict[int, str]] = {NONE: "NONE", LZ4: "LZ4", ZLIB: "ZLIB", ZSTD: "ZSTD", SNAPPY: "SNAPPY"}

Buffer = bytes | bytearray | memoryview


def _compress_lz4(data: Buffer) -> bytes:
    return bytes(cramjam.lz4.compress_block(data, store_size=False))


def _compress_zstd(data: Buffer) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))


def _compress_snappy(data: Buffer) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


_COMPRESSORS: Final[dict[int, Callable[[Buffer], bytes]]] = {
    NONE: bytes,
    LZ4: _compress_lz4,
    ZLIB: zlib.compress,
    ZSTD: _compress_zstd,
    SNAPPY: _compress_snappy,
}

_DECOMPRESS_INTO: Final[dict[int, Callable[[Buffer, bytearray], int]]] = {
    LZ4: cramjam.lz4.decompress_block_into,
    ZSTD: cramjam.zstd.decompress_into,
    SNAPPY: cramjam.snappy.decompress_raw_into,
}


def compress(codec: int, data: Buffer) -> bytes:
    """Compress ``data`` with a CompressionType codec."""
    compressor = _COMPRESSORS.get(codec)
    if compressor is None:
        raise CompressionError(f"unknown compression codec {codec}", codec=codec)
    return compressor(data)


def decompress(codec: int, data: Buffer, uncompressed_size: int, max_size: int) -> bytes:
    """Decompress ``data``, which must expand to exactly ``uncompressed_size`` bytes (≤ ``max_size``)."""
    if codec == NONE:
        if len(data) > max_size:
            raise CompressionError(f"payload of {len(data)} bytes exceeds {max_size}", codec=codec)
        return bytes(data)
    if codec not in _COMPRESSORS:
        raise CompressionError(f"unknown compression codec {codec}", codec=codec)
    if not 0 <= uncompressed_size <= max_size:
        raise CompressionError(
            f"uncompressed size {uncompressed_size} outside 0..{max_size}",
            codec=codec,
            size_bytes=uncompressed_size,
        )
    if codec == ZLIB:
        return _decompress_zlib(data, uncompressed_size)
    return _decompress_into(codec, data, uncompressed_size)


def _decompress_into(codec: int, data: Buffer, size: int) -> bytes:
    out = bytearray(size)
    try:
        written = _DECOMPRESS_INTO[codec](data, out)
    except Exception as exc:  # cramjam raises its own DecompressionError, or ValueError/OSError
        name = _NAMES[codec]
        raise CompressionError(f"corrupt {name} payload: {exc}", codec=codec) from exc
    if written != size:
        raise CompressionError(
            f"{_NAMES[codec]} payload expanded to {written} bytes, expected {size}",
            codec=codec,
            size_bytes=written,
        )
    return bytes(out)


def _decompress_zlib(data: Buffer, size: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, size)
    except zlib.error as exc:
        raise CompressionError(f"corrupt ZLIB payload: {exc}", codec=ZLIB) from exc
    if len(out) != size or not inflater.eof or inflater.unconsumed_tail:
        message = f"ZLIB payload does not expand to exactly {size} bytes"
        raise CompressionError(message, codec=ZLIB, size_bytes=size)
    return out
