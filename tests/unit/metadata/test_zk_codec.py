"""The ZooKeeper store's record encoding and URL parsing (pure functions, no server)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kazoo.protocol.states import ZnodeStat

from magnetar.metadata.zk_codec import decode, encode, parse_zk_url


def _stat(version: int, ctime: int = 1000, mtime: int = 2000) -> ZnodeStat:
    return ZnodeStat(czxid=1, mzxid=2, ctime=ctime, mtime=mtime, version=version, cversion=0, aversion=0,
                     ephemeralOwner=0, dataLength=0, numChildren=0, pzxid=1)


@given(value=st.binary(max_size=64), base=st.integers(0, 2**40), created_ms=st.integers(0, 2**45),
       puts=st.integers(0, 100))
def test_every_value_round_trips_with_its_version(value: bytes, base: int, created_ms: int, puts: int) -> None:
    if base == 0:
        created_ms = 0  # a znode created for the record: its own creation time is the record's
    data = encode(value, base, created_ms)
    assert data, "empty data is an implicit parent, never a record"
    record = decode("/k", data, _stat(base + puts))
    assert record is not None
    assert (record.value, record.version) == (value, puts)
    assert record.created_ms == (created_ms or 1000)


def test_json_values_are_stored_as_they_are() -> None:
    value = b'{"bundles": {"numBundles": 4}}'
    assert encode(value, 0, 0) == value
    record = decode("/admin/policies/public/default", value, _stat(7))
    assert record is not None and (record.value, record.version, record.modified_ms) == (value, 7, 2000)


def test_empty_data_is_no_record() -> None:
    assert decode("/k", b"", _stat(3)) is None


@pytest.mark.parametrize(("url", "hosts", "chroot"), [
    ("zk:127.0.0.1:2181", "127.0.0.1:2181", ""),
    ("zk:a:2181,b:2182/magnetar", "a:2181,b:2182", "/magnetar"),
    ("zk:a:2181/pulsar/cluster-a/", "a:2181", "/pulsar/cluster-a"),
    ("zk://a:2181", "a:2181", ""),
])
def test_urls(url: str, hosts: str, chroot: str) -> None:
    assert parse_zk_url(url) == (hosts, chroot)


@pytest.mark.parametrize("url", ["127.0.0.1:2181", "zk:", "zk:host", "zk:host:x", "zk:host:99999", "zk:h:1//a",
                                 "sqlite:/tmp/x", "zk::2181"])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        parse_zk_url(url)
