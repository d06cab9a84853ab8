"""Time per page of `webtrawl.parse.simhash.simhash`, next to the ways of counting bits it does not use.

A SimHash needs, for each of 64 bits, how many of a page's shingle hashes have it set. All variants below
share the module's words, shingling and xxh3 hashing and differ only in that count, except the first:

  compiled    the module as used: compiled (`_simhash.c`), where it was built
  python      the module's Python version: all hashes as one big integer, bit counts by splitting and
              folding it (SWAR)
  histograms  a `collections.Counter` over each of the 8 bytes of the hashes, each byte value's count
              added to its 8 bits
  lanes       each byte spread by a 256-entry table into 8 lanes of 16 bits of one int; the ints summed
  bit loop    64 steps per hash, the textbook way

Pages are generated text: sentences of pseudo-words drawn with Zipf weights, capitals, digits and
punctuation. "ascii" pages use plain punctuation; "typographic" pages add curly quotes and dashes, which
take the tokenizer's slower non-ASCII path. Figures are the best of several runs, in µs per page; the
last columns split the Python version into words (lower-casing, UTF-8), shingling, hashing and bit counting.

    .venv/bin/python benchmarks/simhash_bench.py [--sizes 200 2000 20000]
"""

from __future__ import annotations

import argparse
import random
import time
from array import array
from collections import Counter
from collections.abc import Callable
from itertools import accumulate

from xxhash import xxh3_64_digest, xxh3_64_intdigest

from webtrawl.parse.simhash import (
    MAX_TOKENS,
    _compiled,
    _majority,
    _python_simhash,
    _shingles,
    _too_few,
    _words,
    simhash,
)

_SIGN_BIT = 1 << 63
_BIT_POSITIONS = [[bit for bit in range(8) if value >> bit & 1] for value in range(256)]
_SPREAD = [sum((value >> bit & 1) << 16 * bit for bit in range(8)) for value in range(256)]


def _signed(unsigned: int) -> int:
    return (unsigned ^ _SIGN_BIT) - _SIGN_BIT


def _hashes(text: str) -> list[int] | None:
    shingles = _shingles(_words(text))
    return None if _too_few(shingles) else [xxh3_64_intdigest(shingle) for shingle in shingles]


def _digests(shingles: list[bytes]) -> bytes:
    return b"".join(map(xxh3_64_digest, shingles))


def simhash_histograms(text: str) -> int | None:
    hashes = _hashes(text)
    if hashes is None:
        return None
    raw = array("Q", hashes).tobytes()
    result = 0
    for byte in range(8):
        counts = [0] * 8
        for value, count in Counter(raw[byte::8]).items():
            for bit in _BIT_POSITIONS[value]:
                counts[bit] += count
        result |= sum(1 << 8 * byte + bit for bit in range(8) if 2 * counts[bit] > len(hashes))
    return _signed(result)


def simhash_lanes(text: str) -> int | None:
    hashes = _hashes(text)
    if hashes is None:
        return None
    raw = array("Q", hashes).tobytes()
    result = 0
    for byte in range(8):
        lanes = sum(map(_SPREAD.__getitem__, raw[byte::8]))
        result |= sum(1 << 8 * byte + bit for bit in range(8) if 2 * (lanes >> 16 * bit & 0xFFFF) > len(hashes))
    return _signed(result)


def simhash_bit_loop(text: str) -> int | None:
    hashes = _hashes(text)
    if hashes is None:
        return None
    votes = [0] * 64
    for h in hashes:
        for bit in range(64):
            votes[bit] += 1 if h >> bit & 1 else -1
    return _signed(sum(1 << bit for bit in range(64) if votes[bit] > 0))


VARIANTS: dict[str, Callable[[str], int | None]] = {
    "compiled": simhash,
    "python": lambda text: _python_simhash(text, MAX_TOKENS),
    "histograms": simhash_histograms,
    "lanes": simhash_lanes,
    "bit loop": simhash_bit_loop,
}


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.randint(1, 4)
        words.add("".join(rng.choice("bcdfghklmnprstvwz") + rng.choice("aeiouy") for _ in range(syllables)))
    return sorted(words, key=lambda word: (len(word), word))


def page(rng: random.Random, words: list[str], weights: list[float], count: int, typographic: bool) -> str:
    """`count` words in sentences, common words far more often than rare ones, as in real text."""
    marks = [",", ";", ":", " -", "."] + (["’s", " —", " “", "” ", "…"] if typographic else ["'s", " (", ")", "!"])
    sentences = []
    written = 0
    while written < count:
        length = min(rng.randint(5, 25), count - written)
        chosen = rng.choices(words, cum_weights=weights, k=length)
        for i in rng.sample(range(length), length // 6):
            chosen[i] = str(rng.randint(0, 3000)) if rng.random() < 0.2 else chosen[i] + rng.choice(marks)
        sentences.append(" ".join(chosen).capitalize() + ".")
        written += length
    return "\n".join(" ".join(sentences[i : i + 6]) for i in range(0, len(sentences), 6))


def best_us(function: Callable[..., object], *args: object, budget: float = 0.3) -> float:
    """Microseconds of the fastest of several batches of calls that together take about `budget` seconds."""
    start = time.perf_counter()
    function(*args)
    once = time.perf_counter() - start
    calls = max(1, int(0.05 / max(once, 1e-9)))
    best = float("inf")
    for _ in range(max(3, int(budget / max(once * calls, 1e-9)))):
        start = time.perf_counter()
        for _ in range(calls):
            function(*args)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 2000, 20000], help="words per page")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    words = vocabulary(rng)
    weights = list(accumulate(1 / rank for rank in range(1, len(words) + 1)))
    if _compiled is None:
        print("the compiled SimHash is not built (xxHash's header was missing at install): its column is empty")
        del VARIANTS["compiled"]
    columns = [*VARIANTS, "words", "shingling", "hashing", "counting"]
    print(f"{'words':>6} {'text':<11} " + " ".join(f"{name:>10}" for name in columns) + "   (µs per page)")
    for size in args.sizes:
        for typographic in (False, True):
            text = page(rng, words, weights, size, typographic)
            results = {name: variant(text) for name, variant in VARIANTS.items()}
            if len(set(results.values())) != 1:
                raise SystemExit(f"variants disagree on a {size}-word page: {results}")
            data = _words(text)
            shingles = _shingles(data)
            digests = _digests(shingles)
            figures = [
                best_us(variant, text, budget=0.3 if name != "bit loop" else 0.1) for name, variant in VARIANTS.items()
            ]
            figures += [
                best_us(_words, text),
                best_us(_shingles, data),
                best_us(_digests, shingles),
                best_us(_majority, digests, len(shingles)),
            ]
            kind = "typographic" if typographic else "ascii"
            print(f"{size:>6} {kind:<11} " + " ".join(f"{figure:>10.0f}" for figure in figures))


if __name__ == "__main__":
    main()
