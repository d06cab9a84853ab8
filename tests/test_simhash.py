"""SimHash fingerprints: what counts as the same text, how far edits move a hash, and the band lookup."""

from __future__ import annotations

import random
import re
import sqlite3
import statistics

import pytest
from xxhash import xxh3_64_intdigest

from webtrawl.parse import simhash as module
from webtrawl.parse.simhash import MAX_CHARS, MAX_TOKENS, MIN_FEATURES, bands, hamming, simhash

VOCABULARY = [f"{first}{second}{third}" for first in "bdklmprst" for second in "aeiou" for third in "lmnrst"]


def words(seed: int, count: int) -> list[str]:
    return random.Random(seed).choices(VOCABULARY, k=count)


def text(seed: int, count: int) -> str:
    return " ".join(words(seed, count))


def textbook_simhash(page: str) -> int | None:
    """Charikar's SimHash counted bit by bit, with the features and limits the module documents."""
    tokens = re.findall(r"\w+", page[:MAX_CHARS].lower())[:MAX_TOKENS]
    shingles = [" ".join(triple) for triple in zip(tokens, tokens[1:], tokens[2:], strict=False)]
    if len(set(shingles)) < MIN_FEATURES:
        return None
    votes = [0] * 64
    for shingle in shingles:
        h = xxh3_64_intdigest(shingle.encode())
        for bit in range(64):
            votes[bit] += 1 if h >> bit & 1 else -1
    unsigned = sum(1 << bit for bit in range(64) if votes[bit] > 0)
    return unsigned - (1 << 64) if unsigned >> 63 else unsigned


@pytest.mark.parametrize(
    "page",
    [
        text(1, 12),
        text(2, 1000),
        text(3, 30) + " 2026-05-09 ," * 3 + " Grüße aus Köln — naïve café, ÉTÉ; 東京 タワー; straße_7 ",
        text(4, 12) + " spam and eggs" * 30,  # repeated shingles count with their repetitions
        "\x00".join(words(5, 200)) + "\u00a0\t\r\n" + "–".join(words(6, 200)) + "\udcff lone\ud800surrogates",
        " ".join(f"t{i}" for i in range(12)),  # 10 shingles: votes tie on about a quarter of the bits
    ],
)
def test_equals_the_textbook_count(page: str) -> None:
    assert simhash(page) == python_simhash(page) == textbook_simhash(page)


def python_simhash(page: str) -> int | None:
    """The module's Python version, which computes the hash where the compiled one was not built."""
    return module._python_simhash(page[:MAX_CHARS], MAX_TOKENS)


def test_the_compiled_version_is_built() -> None:
    # Installs without xxHash's header fall back to the Python version; CI installs it, so both are tested.
    assert module._compiled is not None, "webtrawl.parse._simhash was not built (is libxxhash-dev installed?)"


def test_compiled_and_python_versions_agree_on_any_text() -> None:
    """Any characters at all: every plane of Unicode, lone surrogates, combining marks, characters whose lower
    case is longer (İ), digits of other scripts, control characters, and runs of separators of every kind; and
    text of Latin-1 characters only, which the compiled version lower-cases by itself."""
    rng = random.Random(17)
    common = [*"abc xyz_09 .,;—’\u00a0\t\nİΣς\u0307²①٣日本", "  ", ". ", "\ud800", "\U0001f600"]
    latin1 = [chr(code) for code in range(256)] + [" ", "ab", "XY"] * 20
    for round_ in range(900):
        length = rng.choice([0, 9, 12, 40, 400, 3000])
        pool = (common, latin1, [chr(rng.randrange(0x110000)) for _ in range(40)] + [" "] * 10)[round_ % 3]
        page = "".join(rng.choices(pool, k=length))
        if round_ % 5 == 0:  # few distinct words: the "too few distinct shingles" rule
            page = " ".join(rng.choices(["spam", "ham", "eggs", page[:3]], k=length // 4))
        assert simhash(page) == python_simhash(page), repr(page[:200])
        if module._compiled is not None and round_ % 4 == 0:  # the word limit anywhere, and none
            for limit in (0, 1, 2, 3, MIN_FEATURES, 10, 11, 50):
                expected = module._python_simhash(page, limit)
                assert module._compiled(page, limit) == expected, (limit, repr(page[:200]))


@pytest.mark.parametrize("extra", ["", " ’", " Σ", " 日本"])  # Latin-1 text, and three kinds of wider str
def test_compiled_and_python_versions_agree_at_the_word_limit(extra: str) -> None:
    for count in range(MAX_TOKENS - 3, MAX_TOKENS + 4):
        page = extra + " " + text(count, count)
        assert simhash(page) == python_simhash(page)


def test_identical_text_gives_the_same_stored_value() -> None:
    page = text(7, 500)
    assert simhash(page) == simhash(page[:]) is not None
    # Hashes are stored with the pages: a change here makes old crawls' hashes incomparable with new ones.
    assert simhash("The quick brown fox jumps over the lazy dog, again and again and again.") == -4557341644759650013


def test_case_whitespace_and_punctuation_do_not_count() -> None:
    page = words(8, 300)
    plain = " ".join(page)
    shouted = "\n\n  ".join(word.upper() for word in page)
    punctuated = " ".join(f"«{word}»," if i % 3 else f"{word.capitalize()}." for i, word in enumerate(page))
    assert simhash(plain) == simhash(shouted) == simhash(punctuated)


def test_a_date_and_a_counter_changed_in_a_thousand_words_stay_near() -> None:
    """Each changed word changes three shingles; on 1,000 words that moves a bit or two of the hash, though
    now and then more than three (the exact share is a property of SimHash on pages this short)."""
    distances = []
    for seed in range(100):
        page = words(seed, 1000)
        page[100:102] = ["2026-05-09", "views:", "1234"]
        edited = list(page)
        edited[100:102] = ["2026-05-10", "views:", "1235"]
        distances.append(hamming(simhash(" ".join(page)), simhash(" ".join(edited))))
    assert statistics.mean(distances) <= 3
    assert sum(distance <= 3 for distance in distances) >= 75
    assert max(distances) <= 10


def test_one_word_changed_in_five_thousand_stays_within_three() -> None:
    for seed in range(20):
        page = words(seed, 5000)
        edited = list(page)
        edited[2500] = "changed"
        assert hamming(simhash(" ".join(page)), simhash(" ".join(edited))) <= 3


def test_unrelated_pages_are_far_apart() -> None:
    distances = [hamming(simhash(text(2 * i, 1000)), simhash(text(2 * i + 1, 1000))) for i in range(200)]
    assert min(distances) > 10
    assert 29 <= statistics.mean(distances) <= 35


def test_shuffled_words_are_far_apart() -> None:
    rng = random.Random(9)
    for seed in range(20):
        page = words(seed, 1000)
        shuffled = list(page)
        rng.shuffle(shuffled)
        assert hamming(simhash(" ".join(page)), simhash(" ".join(shuffled))) > 10


@pytest.mark.parametrize(
    "page",
    [
        "",
        "   \n\t ",
        "<<>> ... !!! —",
        "one two",
        " ".join(f"w{i}" for i in range(MIN_FEATURES + 1)),  # MIN_FEATURES - 1 shingles
        "spam " * 10_000,  # many shingles, one distinct
        "ham spam " * 5_000,  # two distinct
    ],
)
def test_too_little_text_has_no_hash(page: str) -> None:
    assert simhash(page) is None


def test_enough_distinct_shingles_have_a_hash() -> None:
    assert simhash(" ".join(f"w{i}" for i in range(MIN_FEATURES + 2))) is not None
    # Repeated shingles after distinct ones still count.
    assert simhash(" ".join(f"w{i}" for i in range(MIN_FEATURES + 2)) + " spam" * 1000) is not None


def test_only_the_beginning_of_a_huge_page_counts() -> None:
    beginning = text(10, MAX_TOKENS)
    assert simhash(beginning + " " + text(11, 1000)) == simhash(beginning)
    long_words = " ".join(word * 20 for word in words(12, 5000))  # 5,000 words, over MAX_CHARS characters
    assert len(long_words) > MAX_CHARS
    assert simhash(long_words + " tail") == simhash(long_words[:MAX_CHARS])


def test_hashes_are_signed_64_bit_with_both_signs() -> None:
    hashes = [simhash(text(seed, 100)) for seed in range(200)]
    assert all(h is not None and -(1 << 63) <= h < 1 << 63 for h in hashes)
    assert any(h < 0 for h in hashes) and any(h > 0 for h in hashes)


def test_hamming_counts_differing_bits_of_signed_values() -> None:
    assert hamming(5, 5) == 0
    assert hamming(0, -1) == 64
    assert hamming(-(1 << 63), (1 << 63) - 1) == 64
    assert hamming(-(1 << 63), 0) == 1
    assert hamming(-2, -1) == hamming(-1, -2) == 1


def flip(h: int, bits: list[int]) -> int:
    unsigned = (h & ((1 << 64) - 1)) ^ sum(1 << bit for bit in bits)
    return unsigned - (1 << 64) if unsigned >> 63 else unsigned


def test_hashes_within_k_bits_share_a_band() -> None:
    rng = random.Random(13)
    for k in range(16):
        for _ in range(300):
            h = rng.getrandbits(64) - (1 << 63)
            other = flip(h, rng.sample(range(64), rng.randint(0, k)))
            assert set(bands(h, k)) & set(bands(other, k)), (k, h, other)


def test_hashes_twenty_bits_apart_rarely_share_a_band() -> None:
    rng = random.Random(14)
    shared = 0
    for _ in range(2000):
        h = rng.getrandbits(64) - (1 << 63)
        shared += bool(set(bands(h)) & set(bands(flip(h, rng.sample(range(64), 20)))))
    assert shared < 30  # 4 · C(48, 20) / C(64, 20): about 0.34 %


def test_band_layout() -> None:
    h = simhash(text(15, 300))
    assert h is not None
    unsigned = h & ((1 << 64) - 1)
    assert bands(h) == [band << 16 | (unsigned >> 16 * band) & 0xFFFF for band in range(4)]
    assert bands(h, 0) == [h]
    # k = 4: blocks of 13, 13, 13, 13 and 12 bits.
    assert bands(-1, 4) == [0 << 13 | 0x1FFF, 1 << 13 | 0x1FFF, 2 << 13 | 0x1FFF, 3 << 13 | 0x1FFF, 4 << 13 | 0xFFF]
    for k in range(1, 64):
        keys = bands(-1, k)
        assert len(set(keys)) == k + 1
        assert all(0 <= key < 1 << 38 for key in keys)
    for k in (-1, 64):
        with pytest.raises(ValueError):
            bands(h, k)


def test_sqlite_finds_near_duplicates_with_one_indexed_lookup() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE bands(band INTEGER NOT NULL, fp INTEGER NOT NULL, PRIMARY KEY(band, fp))")
        pages = {fp: words(100 + fp, 5000) for fp in range(50)}
        hashes = {fp: simhash(" ".join(page)) for fp, page in pages.items()}
        conn.executemany("INSERT INTO bands VALUES (?, ?)", [(b, fp) for fp, h in hashes.items() for b in bands(h)])
        edited = list(pages[17])
        edited[10] = "changed"
        probe = simhash(" ".join(edited))
        assert probe is not None
        keys = bands(probe)
        query = f"SELECT DISTINCT fp FROM bands WHERE band IN ({', '.join('?' * len(keys))})"
        plan = " ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + query, keys))
        assert "USING COVERING INDEX" in plan or "USING PRIMARY KEY" in plan
        candidates = [fp for (fp,) in conn.execute(query, keys)]
        assert [fp for fp in candidates if hamming(probe, hashes[fp]) <= 3] == [17]
    finally:
        conn.close()
