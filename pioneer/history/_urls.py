"""Store URLs: which targets are PostgreSQL URLs, and how a message names one.

Both the store factory (:mod:`.open`) and the PostgreSQL store read a URL with these, so
neither imports the other. A URL is read by libpq's own parser
(:func:`~pioneer.settings.store_url_parameters`): what is hidden in messages is what the
driver will see.
"""

from __future__ import annotations

import os
from urllib.parse import quote, urlencode

from ..settings import STORE_URL_SCHEMES, store_url_parameters

__all__ = ["URL_SCHEMES", "is_store_url", "normalize_url", "redact_url"]

#: URL schemes that select the PostgreSQL store.
URL_SCHEMES = STORE_URL_SCHEMES




def is_store_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` is a PostgreSQL URL (anything else is an SQLite path)."""
    if not isinstance(target, str):
        return False
    scheme, sep, _ = target.partition("://")
    return bool(sep) and scheme.lower() in URL_SCHEMES


def normalize_url(url: str) -> str:
    """``url`` with its scheme in lower case, as libpq needs it (schemes are not case
    sensitive, but libpq reads ``POSTGRESQL://`` as a malformed ``key=value`` string)."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme.lower()}{sep}{rest}" if sep else url


def redact_url(url: str) -> str:
    """``url`` as a message names it: without its password, wherever the URL put it (in
    the user part or as ``?password=``), as libpq parses it. A URL libpq cannot parse is
    named by its scheme alone; so is every URL when psycopg is missing."""
    scheme = url.partition("://")[0].lower()
    try:
        parameters = store_url_parameters(url)
    except ValueError:
        return f"{scheme}://…"
    if not parameters:  # no psycopg to parse with
        return f"{scheme}://…"
    hidden = parameters.pop("password", None) is not None
    user = quote(parameters.pop("user", ""), safe="")
    host = parameters.get("host", "")
    # A socket folder or a list of hosts goes in the query, as libpq reads it there.
    netloc_host = "" if not host or host.startswith("/") or "," in host else host
    if netloc_host:
        del parameters["host"]
        port = parameters.pop("port", "")
        netloc_host = (f"[{netloc_host}]" if ":" in netloc_host else netloc_host) + \
            (f":{port}" if port else "")
    userinfo = user + (":***" if hidden else "")
    database = quote(parameters.pop("dbname", ""), safe="")
    query = urlencode(parameters)
    return (f"{scheme}://{userinfo}{'@' if userinfo else ''}{netloc_host}/{database}"
            + (f"?{query}" if query else ""))
