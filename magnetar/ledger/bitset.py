"""java.util.BitSet as int64 words, the wire form of a batch entry's ack set.

Bit ``i`` lives in word ``i // 64`` at bit ``i % 64``; words are signed 64-bit (Java ``long``), trailing
zero words are dropped (``BitSet.toLongArray``). Internally a set is one non-negative Python int. Knows
nothing of cursors or positions.
"""

from __future__ import annotations

from collections.abc import Sequence

WORD_BITS = 64
_WORD_MASK = (1 << WORD_BITS) - 1
_SIGN_BIT = 1 << (WORD_BITS - 1)

#: Largest batch a cursor tracks per-index acks for (Pulsar batches are far smaller); bounds memory.
BATCH_SIZE_MAX = 1 << 16


def words_to_int(words: Sequence[int], bits_max: int) -> int:
    """The bit set of ``words`` (signed or unsigned 64-bit values), truncated to ``bits_max`` bits."""
    value = 0
    for i, word in enumerate(words[: (bits_max + WORD_BITS - 1) // WORD_BITS]):
        value |= (int(word) & _WORD_MASK) << (i * WORD_BITS)
    return value & all_set(bits_max)


def int_to_words(value: int) -> list[int]:
    """Signed int64 words of a non-negative bit set, without trailing zero words."""
    assert value >= 0
    words: list[int] = []
    while value:  # bounded by the bit length
        word = value & _WORD_MASK
        words.append(word - (1 << WORD_BITS) if word & _SIGN_BIT else word)
        value >>= WORD_BITS
    return words


def all_set(bits: int) -> int:
    """A set with bits ``0 .. bits-1`` set."""
    return (1 << max(bits, 0)) - 1
