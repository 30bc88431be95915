"""Search text and safe FTS5 queries: what the episodic index stores and how it is asked.

Two pure functions over text. :func:`search_form` is the text the FTS5 table indexes for a
snippet: the snippet itself, with every Han, Hiragana and Katakana character set apart by
spaces, because SQLite's ``unicode61`` tokenizer only splits on spaces and punctuation and
would otherwise index a whole Japanese or Chinese sentence as one word. :func:`fts_query`
turns arbitrary user text into an FTS5 query that is only ever a list of double-quoted
phrases joined by ``OR``: FTS5 syntax in the user's text (``NEAR``, ``*``, ``col:``,
``-``, parentheses, quotes) is split away as punctuation or quoted as a plain word, so a
message can never change the query's meaning or make it fail to parse.

On PostgreSQL the same terms become a ``tsquery`` (:func:`ts_query`): every word a
single-quoted lexeme, a character pair a ``<->`` phrase, joined by ``|``; the search form
(:func:`ts_search_form`) also folds diacritics away, which SQLite's tokenizer does itself.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "MAX_QUERY_TERMS",
    "STOPWORDS",
    "TS_CONFIG",
    "fts_query",
    "query_terms",
    "query_words",
    "search_form",
    "ts_operands",
    "ts_query",
    "ts_search_form",
]

#: The PostgreSQL text search configuration of the index (Snowball English stemming,
#: like the Porter stemmer of the SQLite index).
TS_CONFIG = "english"

#: Distinct terms a query keeps; a long message keeps its longest words.
MAX_QUERY_TERMS = 32

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_CJK_CHAR = re.compile(f"([{_CJK}])")
# A word as the unicode61 tokenizer sees one: letters and digits, underscore separates.
_WORD = re.compile(r"[^\W_]+")
_CJK_RUN = re.compile(f"[{_CJK}]+")

#: Common English words left out of queries: they match nearly every snippet, so they add
#: work without changing the ranking much.
STOPWORDS = frozenset(
    "a about after again all also am an and any are as at be because been before being "
    "but by can could did do does doing for from had has have having he her here hers him "
    "his how i if in into is it its just me my no nor not of on or our ours out over she "
    "so some such than that the their them then there these they this those to too under "
    "until up very was we were what when where which while who why will with would you "
    "your yours".split()
)


def search_form(text: str) -> str:
    """The text as indexed: ideographic and kana characters each become their own word."""
    return _CJK_CHAR.sub(r" \1 ", text)


def _phrase(words: list[str]) -> str:
    # Inside an FTS5 string the only special character is the quote, escaped by doubling.
    return '"' + " ".join(word.replace('"', '""') for word in words) + '"'


def query_terms(text: str) -> list[str]:
    """The quoted phrases a query is built from, deduplicated, at most MAX_QUERY_TERMS.

    A word is a run of letters and digits, lower-cased; one-character words and stopwords
    are dropped. A run of ideographs or kana becomes its overlapping character pairs (a
    single character stays alone), each a phrase of adjacent characters.
    """
    found: dict[str, int] = {}
    for match in _WORD.finditer(text):
        word = match.group()
        for piece in _split_cjk(word):
            if piece not in found:
                found[piece] = len(found)
    ordered = list(found)
    if len(ordered) > MAX_QUERY_TERMS:
        # Longer words are usually rarer, so they say more about what the user means.
        ordered = sorted(ordered, key=lambda term: (-_weight(term), found[term]))
        ordered = sorted(ordered[:MAX_QUERY_TERMS], key=found.__getitem__)
    return ordered


def query_words(text: str) -> int:
    """How many words the :func:`query_terms` of ``text`` come from: a searchable word
    counts once, and so does a run of ideographs or kana, whatever its pairs."""
    words: set[str] = set()
    for match in _WORD.finditer(text):
        word = match.group()
        position = 0
        for run in _CJK_RUN.finditer(word):
            words.update(_plain(word[position:run.start()]))
            words.add(run.group())
            position = run.end()
        words.update(_plain(word[position:]))
    return len(words)


def _weight(term: str) -> int:
    return len(term.replace('"', "").replace(" ", ""))


def _split_cjk(word: str) -> list[str]:
    pieces: list[str] = []
    position = 0
    for run in _CJK_RUN.finditer(word):
        pieces.extend(_plain(word[position:run.start()]))
        chars = list(run.group())
        if len(chars) == 1:
            pieces.append(_phrase(chars))
        else:
            pieces.extend(_phrase(chars[i:i + 2]) for i in range(len(chars) - 1))
        position = run.end()
    pieces.extend(_plain(word[position:]))
    return pieces


def _plain(word: str) -> list[str]:
    lowered = word.lower()  # FTS5 folds case anyway; this only merges repeats
    if len(lowered) < 2 or lowered in STOPWORDS:
        return []
    return [_phrase([lowered])]


def fts_query(text: str) -> str | None:
    """An FTS5 ``MATCH`` expression for ``text``, or ``None`` when nothing is searchable."""
    terms = query_terms(text)
    return " OR ".join(terms) if terms else None


def _fold(text: str) -> str:
    # Compatibility decomposition, then drop the combining marks: "Köln" -> "Koln".
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def ts_search_form(text: str) -> str:
    """The text PostgreSQL indexes: :func:`search_form` with diacritics folded away."""
    return search_form(_fold(text))


def _lexeme(word: str) -> str:
    # A quoted tsquery lexeme: a quote is doubled and a backslash escaped, so the word
    # stays one operand whatever it holds.
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def ts_operands(text: str) -> list[str]:
    """The ``tsquery`` operand of each of the :func:`query_terms` of ``text``'s folded
    form: a quoted lexeme, or quoted characters joined by ``<->``."""
    operands = []
    for term in query_terms(_fold(text)):
        words = term[1:-1].replace('""', '"').split(" ")
        operands.append(" <-> ".join(_lexeme(word) for word in words))
    return operands


def ts_query(text: str) -> str | None:
    """A ``to_tsquery`` expression for ``text`` (its :func:`ts_operands` joined by ``|``),
    or ``None`` when nothing is searchable."""
    operands = ts_operands(text)
    return " | ".join(operands) if operands else None
