"""Content fingerprints for near-duplicate pages: a 64-bit SimHash (Charikar) of a page's visible text.

Two pages whose texts share most of their features get hashes that differ in few bits, so "near-duplicate"
becomes "Hamming distance at most k" (3 by default), and `bands` turns that into one indexed lookup.

Features are the overlapping 3-word shingles of the text: words are the lower-cased runs of `\\w` (Unicode
letters, digits and `_`; scripts written without spaces, such as Chinese, give one word per run), so case,
whitespace and punctuation do not count. Single words would ignore order: a page with its words shuffled, or
two pages built from the same vocabulary, would look alike. With shingles, reordered text is unrelated, and
changing one word changes three features. Each shingle is hashed with xxh3 and counts as often as it occurs.

How far an edit moves the hash depends on the page's length (measured on generated text): one word changed
in 1,000 moves it 1.7 bits on average, more than 3 bits one time in ten; two words (a date and a counter)
2.3 bits, more than 3 one time in six; one word in 5,000, 0.8 bits, rarely more than 3; on 200 words, one
word moves it 3.4 bits. Unrelated pages, or the same words shuffled, differ in about 32 bits, rarely under 20.

Only the first `MAX_CHARS` characters and, of those, the first `MAX_TOKENS` words count: a huge page is
judged by its beginning and costs bounded time (at most about 12 ms where a 2,000-word page takes 0.4 ms).
A text with fewer than `MIN_FEATURES` distinct shingles gets no hash (`None`): an empty or near-empty page
would otherwise match every other one, and on so few features one changed word moves the hash too far to
judge anything.

The whole of it is compiled (`_simhash.c`, ~8x faster) where xxHash's header was there at install;
otherwise the Python version here computes it, to the same hashes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from xxhash import xxh3_64_digest

_compiled: Callable[[str, int], int | None] | None
try:
    from ._simhash import simhash as _compiled
except ImportError:  # built without xxHash's header: the Python version below
    _compiled = None

NEAR_DISTANCE = 3
"""The default near-duplicate distance: hashes at most this many bits apart are near-duplicates."""
MIN_FEATURES = 8
"""Fewest distinct 3-word shingles (a text of at least 10 words) for a text to get a hash."""
MAX_CHARS = 200_000
"""Characters of a text considered; the rest is ignored."""
MAX_TOKENS = 20_000
"""Words considered, of the first `MAX_CHARS` characters."""

# Words are found by `split` on UTF-8 bytes, at a fraction of the cost of `re.findall(r"\w+")` on the text,
# and give the same words: non-ASCII characters that are not word characters (curly quotes, dashes, no-break
# spaces, lone surrogates) become spaces first, then every ASCII byte outside [0-9A-Za-z_] does. What is left
# of a non-ASCII character is a word character's UTF-8 bytes, all from 128 up, which the translation keeps.
# A page has few distinct non-ASCII characters, so they are judged one by one, each replaced at once; one
# regular-expression pass over the text would cost about 10 ns a character (0.15 ms on a 20 KB page).
_WORD_CHARACTER = re.compile(r"\w")
_ASCII = bytes(range(128))
_ASCII_NON_WORD_TO_SPACE = bytes(
    byte if byte >= 128 or chr(byte).isalnum() or byte == ord("_") else ord(" ") for byte in range(256)
)

_BITS = (1 << 64) - 1
_SIGN_BIT = 1 << 63
_LANES = 0x0001_0001_0001_0001
"""The lowest bit of each 16-bit lane of a 64-bit word."""


def _repeat(word: int, words: int) -> int:
    return int.from_bytes(word.to_bytes(8, "little") * words, "little")


# `_majority` folds at most 15 times, and its 16-bit lanes compare counts up to 2**15.
assert MAX_TOKENS <= 1 << 15
# One mask per lane width (1, 2, 4, 8 bits) selecting the even lanes, long enough for the most hashes
# (MAX_TOKENS - 2): built once, as an AND with a longer mask costs only the shorter operand's length.
_EVEN_LANES = [
    _repeat(word, MAX_TOKENS)
    for word in (0x5555_5555_5555_5555, 0x3333_3333_3333_3333, 0x0F0F_0F0F_0F0F_0F0F, 0x00FF_00FF_00FF_00FF)
]


def simhash(text: str) -> int | None:
    """The SimHash of `text` as a signed 64-bit int (as stored in SQLite), or None when it has fewer than
    `MIN_FEATURES` distinct shingles. Bit i is set when more of the text's shingles (counted with their
    repetitions) have bit i set in their hash than not; a tie leaves it clear."""
    return (_compiled or _python_simhash)(text[:MAX_CHARS], MAX_TOKENS)


def hamming(a: int, b: int) -> int:
    """How many of the 64 bits differ between two hashes (signed or not)."""
    return ((a ^ b) & _BITS).bit_count()


def bands(h: int, k: int = NEAR_DISTANCE) -> list[int]:
    """The k + 1 bands of hash `h`: any two hashes within Hamming distance `k` share at least one.

    The 64 bits are cut into k + 1 blocks of nearly equal width (the first `64 % (k + 1)` one bit wider),
    lowest bits first; at most k differing bits leave at least one block the same in both. Band i is
    `i << w | block` with w the widest block's width (for k = 3: `i << 16 | bits 16i…16i+15`), so a band
    says which block it is, and rows of (band, fingerprint) find every candidate of a hash with one
    `WHERE band IN (...)` on an index. All bands are non-negative and below 2**38, except for k = 0: its one
    band is the hash `h` itself, as given. Only hashes banded with the same k can be compared this way.
    """
    if not 0 <= k < 64:
        raise ValueError(f"k must be between 0 and 63, not {k}")
    if k == 0:
        return [h]
    h &= _BITS
    narrow, wider = divmod(64, k + 1)
    width = narrow + (wider > 0)
    result = []
    shift = 0
    for band in range(k + 1):
        size = narrow + (band < wider)
        result.append(band << width | (h >> shift) & ((1 << size) - 1))
        shift += size
    return result


def _words(text: str) -> bytes:
    """The text lower-cased as UTF-8, each non-ASCII character that is not a word character a space: its words
    are then the runs of bytes that are ASCII word characters or from 128 up."""
    data = text.lower().encode("utf-8", "surrogatepass")
    if not data.isascii():
        # A character's UTF-8 bytes are all ASCII or all from 128 up, and no character's bytes occur inside
        # another's: the non-ASCII bytes alone decode to the non-ASCII characters, and a replace is exact.
        for character in set(data.translate(None, _ASCII).decode("utf-8", "surrogatepass")):
            if _WORD_CHARACTER.match(character) is None:
                data = data.replace(character.encode("utf-8", "surrogatepass"), b" ")
    return data


def _python_simhash(text: str, max_words: int) -> int | None:
    """The SimHash of `text`'s first `max_words` words, as the compiled `simhash` computes it: for 0 <=
    `max_words` <= `MAX_TOKENS`, which `_majority`'s lanes are sized for."""
    shingles = _shingles(_words(text), max_words)
    if _too_few(shingles):
        return None
    majority = _majority(b"".join(map(xxh3_64_digest, shingles)), len(shingles))
    return (majority ^ _SIGN_BIT) - _SIGN_BIT


def _shingles(data: bytes, max_words: int = MAX_TOKENS) -> list[bytes]:
    """The 3-word shingles of `_words`' bytes, in order, words joined by one space."""
    words = data.translate(_ASCII_NON_WORD_TO_SPACE).split()[:max_words]
    return list(map(b" ".join, zip(words, words[1:], words[2:], strict=False)))


def _too_few(shingles: list[bytes]) -> bool:
    """Whether there are fewer than `MIN_FEATURES` distinct shingles. Real text has no repeated shingle among
    its first few, which settles it without building a set of them all."""
    if len(shingles) < MIN_FEATURES:
        return True
    return len(set(shingles[:MIN_FEATURES])) < MIN_FEATURES and len(set(shingles)) < MIN_FEATURES


def _majority(digests: bytes, count: int) -> int:
    """The 64-bit word whose bit i is set when more than half of the `count` big-endian 64-bit words in
    `digests` have bit i set.

    Counting bit by bit in Python takes 64 steps per word, far too slow; here every step works on all words
    at once, as one big integer (SIMD within a register). The integer starts as `count` words of 64 one-bit
    lanes. A split makes two integers of it, one holding the even lanes and one the odd lanes, each widened
    to twice the width; a fold adds the upper half of the words onto the lower half, halving the integer,
    which doubles the most a lane can hold. So: split to 2-bit lanes and fold once, to 4-bit lanes and fold
    up to 3 times in all, to 8-bit lanes (7 folds), to 16-bit lanes (15 folds, enough for 2**15 words).
    What is left is 16 single words of four 16-bit lanes, each lane the count of one bit, compared to half
    the count four lanes at a time: adding `0x7FFF - count // 2` sets a lane's bit 15 exactly when the
    lane exceeds `count // 2`.
    """
    words = count
    # (bit, part): lane i of the part counts the digests' bit `bit + i * lane width`.
    parts = [(0, int.from_bytes(digests, "big"))]
    folds = 0
    for width, even_lanes in zip((1, 2, 4, 8), _EVEN_LANES, strict=True):
        parts = [(bit + shift, (part >> shift) & even_lanes) for bit, part in parts for shift in (0, width)]
        while words > 1 and folds < 2 * width - 1:
            words = (words + 1) // 2
            lower = (1 << 64 * words) - 1
            parts = [(bit, (part & lower) + (part >> 64 * words)) for bit, part in parts]
            folds += 1
    over_half = (0x7FFF - count // 2) * _LANES
    majority = 0
    for bit, part in parts:
        majority |= (((part + over_half) >> 15) & _LANES) << bit
    return majority
