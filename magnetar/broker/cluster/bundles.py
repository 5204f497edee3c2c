"""Namespace bundles: the hash ranges a namespace is cut into, the unit a broker owns (Pulsar's
``NamespaceBundles`` / ``NamespaceBundleFactory``).

A namespace's bundles are its sorted *boundaries* over ``0x00000000``-``0xffffffff`` (``n`` bundles have
``n + 1`` boundaries). Bundle ``i`` holds the hashes ``boundaries[i] <= h < boundaries[i + 1]``; the last one
also holds ``0xffffffff``. A topic belongs to the bundle holding the CRC32 of its full name
(``persistent://tenant/ns/topic-partition-3``: each partition hashes apart, so a partitioned topic spreads),
the value Pulsar takes from Guava's ``Hashing.crc32()`` (zlib's CRC32, unsigned). A bundle is named by its
range, ``0x00000000_0x40000000``, in lock keys, admin paths and the CLI.

The default cut (``defaultNumberOfNamespaceBundles``, 4) is Pulsar's: boundaries every ``2**32 // n``, the
last one ``0xffffffff``. A split replaces one bundle by two or more whose ranges cover it exactly: halves
(``range_equally_divide``), at given positions (``specified_positions_divide``) or at the median hash of the
bundle's topics (``topic_count_equally_divide``).

Pure values and arithmetic: no store, no broker. Who owns a bundle is ``ownership``'s business; where the
boundaries are kept is ``magnetar.resources``'.
"""

from __future__ import annotations

import bisect
import enum
import itertools
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FULL_LOWER = 0x00000000
FULL_UPPER = 0xFFFFFFFF
HASH_SPACE = 1 << 32
DEFAULT_BUNDLES = 4  # defaultNumberOfNamespaceBundles
BUNDLES_MAX = 4096  # a namespace's boundaries are one metadata record: bounded well below its size limit


class BundleError(ValueError):
    """A bundle range, a set of boundaries or a split that does not make sense (a client's mistake)."""


def topic_hash(full_name: str) -> int:
    """The hash that places a topic in a bundle: CRC32 of its full name in UTF-8, unsigned."""
    return zlib.crc32(full_name.encode("utf-8")) & 0xFFFFFFFF


def _hex(value: int) -> str:
    return f"0x{value:08x}"


def parse_boundary(text: str) -> int:
    """``0x40000000`` (or a decimal, as Java's ``Long.decode`` reads) as a hash value."""
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise BundleError(f"invalid bundle boundary {text!r}: expected a hex value like 0x40000000") from None
    if not FULL_LOWER <= value <= FULL_UPPER:
        raise BundleError(f"bundle boundary {text!r} is outside 0x00000000-0xffffffff")
    return value


@dataclass(frozen=True, slots=True, order=True)
class BundleRange:
    """One bundle's hash range: ``lower <= h < upper`` (``upper == 0xffffffff`` includes it)."""

    lower: int
    upper: int

    def __post_init__(self) -> None:
        if not FULL_LOWER <= self.lower < self.upper <= FULL_UPPER:
            raise BundleError(f"invalid bundle range {self.lower:#x}_{self.upper:#x}")

    @classmethod
    def parse(cls, text: str) -> BundleRange:
        """``0x00000000_0x40000000`` as Pulsar spells a bundle."""
        low, sep, high = text.strip().partition("_")
        if not sep:
            raise BundleError(f"invalid bundle range {text!r}: expected 0xLOWER_0xUPPER")
        return cls(parse_boundary(low), parse_boundary(high))

    @property
    def name(self) -> str:
        return f"{_hex(self.lower)}_{_hex(self.upper)}"

    def __str__(self) -> str:
        return self.name

    def contains(self, value: int) -> bool:
        return self.lower <= value < self.upper or (value == self.upper == FULL_UPPER)

    @property
    def full(self) -> bool:
        return self.lower == FULL_LOWER and self.upper == FULL_UPPER


class SplitAlgorithm(enum.Enum):
    """Pulsar's ``splitAlgorithmName`` values magnetar implements."""

    RANGE_EQUALLY_DIVIDE = "range_equally_divide"
    TOPIC_COUNT_EQUALLY_DIVIDE = "topic_count_equally_divide"
    SPECIFIED_POSITIONS_DIVIDE = "specified_positions_divide"

    @classmethod
    def parse(cls, name: str | None) -> SplitAlgorithm:
        if not name:
            return cls.RANGE_EQUALLY_DIVIDE
        for algorithm in cls:
            if algorithm.value == name:
                return algorithm
        known = ", ".join(a.value for a in cls)
        raise BundleError(f"unsupported namespace bundle split algorithm {name!r}; supported: {known}")


def default_boundaries(count: int = DEFAULT_BUNDLES) -> tuple[int, ...]:
    """Pulsar's even cut into ``count`` bundles."""
    if not 1 <= count <= BUNDLES_MAX:
        raise BundleError(f"invalid number of bundles {count}: it must lie in 1..{BUNDLES_MAX}")
    step = HASH_SPACE // count
    return (*(i * step for i in range(count)), FULL_UPPER)


@dataclass(frozen=True, slots=True)
class Bundles:
    """A namespace's bundles, as its sorted boundaries (Pulsar's ``BundlesData``)."""

    boundaries: tuple[int, ...]

    def __post_init__(self) -> None:
        b = self.boundaries
        if len(b) < 2 or b[0] != FULL_LOWER or b[-1] != FULL_UPPER:
            raise BundleError("bundle boundaries must start at 0x00000000 and end at 0xffffffff")
        if any(low >= high for low, high in itertools.pairwise(b)):
            raise BundleError("bundle boundaries must be strictly increasing")
        if len(b) - 1 > BUNDLES_MAX:
            raise BundleError(f"a namespace holds at most {BUNDLES_MAX} bundles")

    @classmethod
    def default(cls, count: int = DEFAULT_BUNDLES) -> Bundles:
        return cls(default_boundaries(count))

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Bundles:
        """Pulsar's ``{"boundaries": ["0x00000000", ...], "numBundles": n}`` (repeats ignored, as Pulsar does)."""
        raw = value.get("boundaries")
        if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
            raise BundleError("bundles: 'boundaries' must be a list of hex strings")
        return cls(tuple(sorted({parse_boundary(item) for item in raw})))

    def to_json(self) -> dict[str, Any]:
        return {"boundaries": [_hex(b) for b in self.boundaries], "numBundles": len(self)}

    def __len__(self) -> int:
        return len(self.boundaries) - 1

    def ranges(self) -> list[BundleRange]:
        return [BundleRange(low, high) for low, high in itertools.pairwise(self.boundaries)]

    def find_hash(self, value: int) -> BundleRange:
        if not FULL_LOWER <= value <= FULL_UPPER:
            raise BundleError(f"hash {value:#x} is outside the hash space")
        index = min(bisect.bisect_right(self.boundaries, value) - 1, len(self) - 1)
        return BundleRange(self.boundaries[index], self.boundaries[index + 1])

    def find(self, full_name: str) -> BundleRange:
        """The bundle ``full_name`` (a topic's full name) belongs to."""
        return self.find_hash(topic_hash(full_name))

    def has(self, bundle: BundleRange) -> bool:
        """Whether ``bundle`` is one of these bundles exactly (not a part or a union of them)."""
        index = bisect.bisect_left(self.boundaries, bundle.lower)
        return (index + 1 < len(self.boundaries) and self.boundaries[index] == bundle.lower
                and self.boundaries[index + 1] == bundle.upper)

    def split(self, bundle: BundleRange, at: Sequence[int]) -> Bundles:
        """These bundles with ``bundle`` cut at the positions ``at`` (each strictly inside it)."""
        if not self.has(bundle):
            raise BundleError(f"{bundle} is not a bundle of this namespace")
        points = sorted(set(at))
        if not points:
            raise BundleError(f"{bundle}: no position to split at")
        if any(not bundle.lower < p < bundle.upper for p in points):
            raise BundleError(f"split positions must lie strictly inside {bundle}")
        if len(self) + len(points) > BUNDLES_MAX:
            raise BundleError(f"a namespace holds at most {BUNDLES_MAX} bundles")
        return Bundles(tuple(sorted({*self.boundaries, *points})))

    def children(self, parent: BundleRange) -> list[BundleRange]:
        """The bundles that lie inside ``parent`` (after a split of it: its pieces)."""
        return [r for r in self.ranges() if parent.lower <= r.lower and r.upper <= parent.upper]


def split_positions(
    bundle: BundleRange,
    algorithm: SplitAlgorithm,
    *,
    positions: Iterable[int] = (),
    topics: Iterable[str] = (),
) -> list[int]:
    """Where a split of ``bundle`` cuts it. ``positions`` for SPECIFIED_POSITIONS_DIVIDE (those outside the
    bundle are ignored, as Pulsar does), ``topics`` (full names) for TOPIC_COUNT_EQUALLY_DIVIDE."""
    if bundle.upper - bundle.lower < 2:
        raise BundleError(f"{bundle} is too small to split")
    if algorithm is SplitAlgorithm.RANGE_EQUALLY_DIVIDE:
        return [bundle.lower + (bundle.upper - bundle.lower) // 2]
    if algorithm is SplitAlgorithm.SPECIFIED_POSITIONS_DIVIDE:
        inside = sorted({p for p in positions if bundle.lower < p < bundle.upper})
        if not inside:
            raise BundleError(f"none of the given split positions lies inside {bundle}")
        return inside
    hashes = sorted(h for h in map(topic_hash, topics) if bundle.contains(h))
    if len(hashes) < 2:
        raise BundleError(f"{bundle} holds fewer than two topics: nothing to divide by topic count")
    middle = hashes[len(hashes) // 2]  # the upper half starts at the middle topic
    if hashes[len(hashes) // 2 - 1] == middle or not bundle.lower < middle < bundle.upper:
        raise BundleError(f"{bundle}: its topics' hashes cannot be divided evenly")
    return [middle]
