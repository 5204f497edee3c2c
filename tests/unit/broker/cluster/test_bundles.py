"""Bundle math: Pulsar's default cut, the topic hash, finding and splitting bundles."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magnetar.broker.cluster.bundles import (
    FULL_UPPER,
    BundleError,
    BundleRange,
    Bundles,
    SplitAlgorithm,
    default_boundaries,
    split_positions,
    topic_hash,
)


def test_default_cut_is_pulsars() -> None:
    assert Bundles.default().to_json() == {
        "boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"],
        "numBundles": 4,
    }
    assert default_boundaries(1) == (0, FULL_UPPER)
    assert default_boundaries(3) == (0, 0x55555555, 0xAAAAAAAA, FULL_UPPER)
    with pytest.raises(BundleError):
        default_boundaries(0)


def test_topic_hash_is_crc32_of_the_full_name() -> None:
    name = "persistent://public/default/orders-partition-2"
    assert topic_hash(name) == zlib.crc32(name.encode())
    assert topic_hash("persistent://t/n/é") == zlib.crc32("persistent://t/n/é".encode())


def test_find_places_each_hash_in_exactly_one_bundle() -> None:
    bundles = Bundles.default()
    assert bundles.find_hash(0) == BundleRange(0, 0x40000000)
    assert bundles.find_hash(0x3FFFFFFF) == BundleRange(0, 0x40000000)
    assert bundles.find_hash(0x40000000) == BundleRange(0x40000000, 0x80000000)
    assert bundles.find_hash(FULL_UPPER) == BundleRange(0xC0000000, FULL_UPPER)  # the last one is closed


@given(st.integers(0, FULL_UPPER), st.lists(st.integers(1, FULL_UPPER - 1), max_size=20))
def test_every_hash_belongs_to_the_one_range_that_contains_it(value: int, cuts: list[int]) -> None:
    bundles = Bundles(tuple(sorted({0, *cuts, FULL_UPPER})))
    found = bundles.find_hash(value)
    assert found.contains(value)
    assert [r for r in bundles.ranges() if r.contains(value)] == [found]


def test_range_names_parse_back() -> None:
    r = BundleRange.parse("0x40000000_0x80000000")
    assert r.name == "0x40000000_0x80000000" and not r.full
    assert BundleRange.parse("0x00000000_0xffffffff").full
    for bad in ("0x4", "0x80000000_0x40000000", "zz_0x1", "0x0_0x100000000"):
        with pytest.raises(BundleError):
            BundleRange.parse(bad)


def test_json_round_trip_and_validation() -> None:
    bundles = Bundles.from_json({"boundaries": ["0x00000000", "0x80000000", "0x80000000", "0xffffffff"]})
    assert len(bundles) == 2
    assert Bundles.from_json(bundles.to_json()) == bundles
    for bad in ({"boundaries": ["0x00000001", "0xffffffff"]}, {"boundaries": "x"}, {},
                {"boundaries": ["0x00000000", "0x7fffffff"]}):
        with pytest.raises(BundleError):
            Bundles.from_json(bad)


def test_split_halves_a_bundle_and_keeps_the_others() -> None:
    bundles = Bundles.default()
    target = BundleRange(0x40000000, 0x80000000)
    at = split_positions(target, SplitAlgorithm.RANGE_EQUALLY_DIVIDE)
    assert at == [0x60000000]
    after = bundles.split(target, at)
    assert len(after) == 5
    assert after.children(target) == [BundleRange(0x40000000, 0x60000000), BundleRange(0x60000000, 0x80000000)]
    assert not after.has(target) and after.has(BundleRange(0, 0x40000000))
    with pytest.raises(BundleError):
        after.split(target, at)  # no longer a bundle


def test_split_at_given_positions_and_by_topic_count() -> None:
    target = BundleRange(0, 0x40000000)
    assert split_positions(target, SplitAlgorithm.SPECIFIED_POSITIONS_DIVIDE,
                           positions=[0x10, 0x50000000, 0x20000000]) == [0x10, 0x20000000]
    with pytest.raises(BundleError):
        split_positions(target, SplitAlgorithm.SPECIFIED_POSITIONS_DIVIDE, positions=[0x50000000])
    full = BundleRange(0, FULL_UPPER)
    topics = [f"persistent://t/n/topic-{i}" for i in range(101)]
    (cut,) = split_positions(full, SplitAlgorithm.TOPIC_COUNT_EQUALLY_DIVIDE, topics=topics)
    below = sum(1 for t in topics if topic_hash(t) < cut)
    assert below == 50
    with pytest.raises(BundleError):
        split_positions(full, SplitAlgorithm.TOPIC_COUNT_EQUALLY_DIVIDE, topics=topics[:1])
    with pytest.raises(BundleError):
        split_positions(BundleRange(5, 6), SplitAlgorithm.RANGE_EQUALLY_DIVIDE)
    assert SplitAlgorithm.parse(None) is SplitAlgorithm.RANGE_EQUALLY_DIVIDE
    with pytest.raises(BundleError):
        SplitAlgorithm.parse("flow_or_qps_equally_divide")
