"""The local tokenizers: o200k_base loaded offline and counted as tiktoken counts it, the
bundled file's sha256 check, one counter and one cache key per tokenizer."""

from __future__ import annotations

import functools
import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import tiktoken
import tiktoken.load
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tiktoken_ext import openai_public

from pioneer import PioneerError, tokens
from pioneer.caches import LruCache, entry_bytes
from pioneer.tokens import (
    O200K_FILE,
    O200K_SHA256,
    TOKENIZERS,
    TiktokenCounter,
    counter_for,
    default_counter,
    split_long_spaces,
)


@functools.cache
def o200k_reference() -> tiktoken.Encoding:
    """tiktoken's own o200k_base: its pattern, its special tokens and its parse of the BPE
    file, with the file read from the package instead of fetched. The hash its loader would
    check the download against is checked here against the bundled file."""

    def load(url: str, expected_hash: str) -> dict[bytes, int]:
        assert url.endswith("/encodings/o200k_base.tiktoken")
        assert hashlib.sha256(O200K_FILE.read_bytes()).hexdigest() == expected_hash
        return tiktoken.load.load_tiktoken_bpe(str(O200K_FILE))

    with mock.patch.object(openai_public, "load_tiktoken_bpe", load), \
            mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": ""}):  # no cache copy
        return tiktoken.Encoding(**openai_public.o200k_base())


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Any attempt to reach another host fails the test; the encodings load afresh inside
    the guard, and tiktoken's download cache is an empty folder."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a network call was made: {args[:2]!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))
    monkeypatch.setattr(tokens, "_ENCODINGS", {})
    monkeypatch.setattr(tokens, "_WHOLE", {})
    monkeypatch.setattr(tokens, "_RANKS", {})
    yield


def test_the_guard_catches_tiktokens_own_download(no_network: None) -> None:
    """tiktoken's registry would fetch o200k_base; under the guard that fails, so the tests
    below that count under it prove the counter fetches nothing."""
    with pytest.raises(AssertionError, match="a network call was made"):
        tiktoken.get_encoding("o200k_base")


#: English, code, Russian, Chinese, Japanese, Korean, emoji (with joiners and skin tones),
#: numbers, contractions, mixed case, special tokens and every kind of white space.
CORPUS = [
    "",
    "hello world",
    "The quick brown fox doesn't jump; it's THE Fox's day. We'll see, they've said.",
    "def fib(n: int) -> int:\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\n\n",
    '{"id": 12345, "path": "/usr/local/bin", "ok": true}\r\n',
    "Привет, как дела? Это проверка подсчёта токенов на русском языке.",
    "你好\uff0c世界\uff01这是一个用于计数的中文句子。",
    "日本語のテキストとカタカナ、한국어 문장도 있습니다.",
    "🎉🚀 👩🏽‍💻 family: 👨‍👩‍👧‍👦 flags 🇺🇦🇯🇵 ✨",
    "before <|endoftext|> after <|endofprompt|> end",
    "CamelCaseWords and ALLCAPS and mIxEd 3.14159 1234567 x/y/z //comment",
    "tabs\tand\u00a0nbsp\u3000ideographic\u2003em \x0b\x0c\x85 line\u2028sep",
    "x" + " " * 70_000 + "word",
    "x." + "\n" + " " * 70_000 + "\n  y",
    "Look:" + "\t " * 40_000 + "done.",
    "x:" + "\n" * 70_000 + "/usr",  # punctuation takes the line breaks and the slash
    "x" + "\r\n" * 40_000 + "\u3000" * 70_000 + "y",
    "end in spaces" + " " * 70_000,
    "end in lines" + "\n" * 3 + " " * 70_000,
    "before a special" + " " * 70_000 + "<|endoftext|>" + " " * 70_000 + "7",
    "\u3000" * 70_000 + "日本",
    " " * 70_000,
]


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_o200k_counts_equal_tiktokens_o200k_base(no_network: None, text: str) -> None:
    expected = len(o200k_reference().encode(text, allowed_special="all"))
    assert TiktokenCounter(tokenizer="o200k").count(text) == expected


def test_a_few_counts_by_hand() -> None:
    """Independent of the reference: o200k's well-known ids and where it beats cl100k."""
    assert tokens._encoding("o200k").encode("hello world") == [24912, 2375]
    o200k, cl100k = counter_for("o200k"), counter_for("cl100k")
    assert (o200k.count("<|endoftext|>"), o200k.count("<|endofprompt|>")) == (1, 1)
    russian = "Это проверка подсчёта токенов на русском языке."
    assert o200k.count(russian) < cl100k.count(russian)


#: What o200k's pattern tells apart: letters of each case, combining marks, digits,
#: punctuation, slashes, contractions, each kind of white space (U+001C is white space to
#: Python, not to it) and the special tokens.
_PIECES = st.sampled_from([
    "a", "Zé", "É", "7", "123", "!", "?!", ".", "/", "'s", "'LL", " ", "  ", "\t", "\n", "\r\n",
    "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u2003", "\u3000", "\x1c", "\u0301", "\u4e2d",
    "<|endoftext|>", "<|endofprompt|>"])


@settings(max_examples=400, deadline=None)
@given(text=st.lists(_PIECES, max_size=40).map("".join), length=st.integers(1, 6))
@example(text=".\n/", length=1)  # one piece: the point, the line break, the slash
def test_o200k_counting_in_pieces_gives_tiktokens_count(text: str, length: int) -> None:
    """Cut at every white-space run of ``length`` or more as o200k's pattern needs, the
    pieces' counts add up to tiktoken's count of the whole."""
    encoding = o200k_reference()
    pieces = list(split_long_spaces(text, length, specials=tuple(encoding.special_tokens_set),
                                    tokenizer="o200k"))
    assert "".join(pieces) == text
    assert sum(len(encoding.encode(piece, allowed_special="all")) for piece in pieces) == (
        len(encoding.encode(text, allowed_special="all")))


@settings(max_examples=300, deadline=None)
@given(text=st.lists(_PIECES | st.sampled_from(["<|", "|>", "<", "|", "endoftext"]),
                     max_size=30).map("".join),
       tokenizer=st.sampled_from(["cl100k", "o200k"]))
@example(text="a<|endoftext|>b", tokenizer="cl100k")
@example(text="<|endoftext", tokenizer="o200k")
def test_a_count_is_tiktokens_with_special_tokens_allowed(text: str, tokenizer: str) -> None:
    """A text without ``<|`` is counted without looking for special tokens; with or
    without, the count is tiktoken's with every special token allowed."""
    encoding = tokens._encoding(tokenizer)
    assert TiktokenCounter(0, tokenizer=tokenizer).count(text) == len(
        encoding.encode(text, allowed_special="all"))


@pytest.mark.parametrize("tail", ["done.", "", "<|endoftext|>"])
def test_a_million_spaces_are_counted_in_o200k(no_network: None, tail: str) -> None:
    """tiktoken's o200k pattern gives up on a million spaces even at the end of a text
    (it looks for a line break in them first); the counter counts them as the pattern
    would split them: the word, the run (but its last space when text follows) as one
    piece, the rest."""
    text = "Look:" + " " * 1_000_000 + tail
    reference = o200k_reference()
    with pytest.raises(ValueError, match="Regex error while tokenizing"):
        reference.encode(text, allowed_special="all")
    run = " " * (999_999 if tail == "done." else 1_000_000)
    rest = text[len("Look:") + len(run):]
    expected = (len(reference.encode("Look:")) + len(reference._encode_single_piece(run))
                + len(reference.encode(rest, allowed_special="all")))
    assert TiktokenCounter(tokenizer="o200k").count(text) == expected


# -- the bundled file -------------------------------------------------------------------------


def test_the_bundled_file_is_the_one_tiktoken_expects() -> None:
    assert hashlib.sha256(O200K_FILE.read_bytes()).hexdigest() == O200K_SHA256
    assert O200K_SHA256 in Path(openai_public.__file__).read_text("utf-8")


@pytest.mark.parametrize("damage", ["flip", "truncate", "missing"])
def test_a_damaged_file_is_refused(
    no_network: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str,
) -> None:
    copy = tmp_path / "o200k_base.tiktoken"
    data = bytearray(O200K_FILE.read_bytes())
    if damage == "flip":
        data[1000] ^= 1
    elif damage == "truncate":
        del data[len(data) // 2:]
    if damage != "missing":
        copy.write_bytes(bytes(data))
    monkeypatch.setattr(tokens, "O200K_FILE", copy)
    with pytest.raises(PioneerError) as caught:
        TiktokenCounter(tokenizer="o200k").count("hello")
    message = str(caught.value)
    assert message.startswith(f"{copy}: ")
    if damage == "missing":
        assert "cannot read the bundled o200k_base encoding: No such file or directory" in message
    else:
        digest = hashlib.sha256(bytes(data)).hexdigest()
        assert message == (f"{copy}: the bundled o200k_base encoding is damaged: its sha256 is "
                           f"{digest}, expected {O200K_SHA256}; reinstall pioneer")
    assert "o200k" not in tokens._ENCODINGS  # nothing half-loaded is kept


# -- counters and their cache -----------------------------------------------------------------


def test_counter_for_gives_one_shared_counter_per_tokenizer() -> None:
    assert TOKENIZERS == ("cl100k", "o200k")
    assert counter_for("cl100k") is default_counter()
    assert counter_for("o200k") is counter_for("o200k")
    assert counter_for("o200k").tokenizer == "o200k"
    assert counter_for("o200k").cache is default_counter().cache  # one budget for all counts


@pytest.mark.parametrize("name", ["p50k", "o200k_base", ""])
def test_an_unknown_tokenizer_is_named(name: str) -> None:
    expected = f"unknown tokenizer {name!r} (known: cl100k, o200k)"
    with pytest.raises(PioneerError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        counter_for(name)
    with pytest.raises(PioneerError):
        TiktokenCounter(tokenizer=name)
    with pytest.raises(PioneerError):
        list(split_long_spaces("x", tokenizer=name))


def test_counts_are_cached_per_tokenizer() -> None:
    """The same text in one shared cache: each tokenizer's own count, never the other's."""
    cache = LruCache[tuple[str, int, int], int]("token_counts", 1 << 20)
    cl100k = TiktokenCounter(tokenizer="cl100k", cache=cache)
    o200k = TiktokenCounter(tokenizer="o200k", cache=cache)
    text = "Это проверка подсчёта токенов на русском языке, 你好世界 🎉"
    first = cl100k.count(text)
    second = o200k.count(text)
    assert second == len(o200k_reference().encode(text)) != first
    assert (cl100k.count(text), o200k.count(text)) == (first, second)
    stats = cache.stats()
    assert (stats.entries, stats.misses, stats.hits) == (2, 2, 2)


@given(st.lists(st.text(max_size=400), max_size=12))
@settings(max_examples=40, deadline=None)
def test_the_token_cache_reports_what_its_entries_hold(texts: list[str]) -> None:
    """Each count is sized without walking its entry: the reported bytes equal the deep
    measurement of every key and count held."""
    cache = LruCache[tuple[str, int, int], int]("token_counts", 1 << 20)
    for name in ("cl100k", "o200k"):
        counter = TiktokenCounter(tokenizer=name, cache=cache)
        for text in texts:
            counter.count(text)
    keys = cache.keys()  # a copy: the lookups below reorder the cache
    held = {key: cache.get(key) for key in keys}
    assert cache.stats().bytes == sum(entry_bytes(key, found) for key, found in held.items())


def test_the_cache_budget_follows_the_latest_setting() -> None:
    budget = default_counter().cache.budget
    try:
        counter_for("o200k", cache_bytes=1 << 20)
        assert default_counter().cache.budget == 1 << 20
    finally:
        default_counter(budget)

