"""How the ZooKeeper store lays records into znodes, and how its URL reads. Pure functions, no I/O.

Data encoding (bijective, so every value round-trips):

- empty data: an implicit parent (a znode that exists only because keys below it do), no record;
- first byte not 0x00 (every JSON value): the value itself; the API version is the znode's version;
- first byte 0x00: a header ``0x00, varint base, varint created_ms`` then the value. Used for empty values,
  values starting with 0x00, and records created in a znode that already existed: its version did not start
  at 0, so the API version is the znode's version minus ``base`` (0 after creation, +1 per put, as in every
  backend). ``created_ms`` 0 means the znode's own creation time.
"""

from __future__ import annotations

from kazoo.protocol.states import ZnodeStat

from magnetar.metadata import _rules
from magnetar.metadata.api import MetadataError, Record

_HEADER = 0


def parse_zk_url(url: str) -> tuple[str, str]:
    """``zk:host:port[,host:port...][/chroot]`` -> (hosts, chroot or ''). ValueError when malformed."""
    if not url.startswith("zk:"):
        raise ValueError(f"not a ZooKeeper URL (zk:host:port[,host:port][/chroot]): {url!r}")
    rest = url[3:].removeprefix("//")
    hosts, slash, chroot = rest.partition("/")
    chroot = (slash + chroot).rstrip("/")
    if not hosts:
        raise ValueError(f"no ZooKeeper host in {url!r}")
    for host in hosts.split(","):
        name, colon, port = host.rpartition(":")
        if not colon or not name or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"ZooKeeper host must be host:port, not {host!r} (in {url!r})")
    if chroot:
        try:
            _rules.validate_key(chroot, allow_root=False)
        except MetadataError as exc:
            raise ValueError(f"bad chroot {chroot!r} in {url!r}: {exc}") from None
    return hosts, chroot


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(data: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(10):  # 64 bits at most
        if offset >= len(data):
            break
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, offset
    raise MetadataError("corrupt record header in ZooKeeper data")


def encode(value: bytes, base: int, created_ms: int) -> bytes:
    """The znode data of a record (see the module docstring)."""
    if base == 0 and value and value[0] != _HEADER:
        return value
    return bytes([_HEADER]) + _varint(base) + _varint(created_ms) + value


def decode(key: str, data: bytes, stat: ZnodeStat) -> Record | None:
    """The record a znode holds, or None for an implicit parent."""
    if not data:
        return None
    if data[0] != _HEADER:
        return Record(key, data, stat.version, stat.ctime, stat.mtime)
    base, offset = _read_varint(data, 1)
    created_ms, offset = _read_varint(data, offset)
    return Record(key, data[offset:], stat.version - base, created_ms or stat.ctime, stat.mtime)


def version_base(data: bytes) -> int:
    return _read_varint(data, 1)[0] if data and data[0] == _HEADER else 0
