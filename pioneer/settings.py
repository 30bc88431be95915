"""Settings: the command line, then ``PIONEER_*`` variables, then ``pioneer.toml``, then defaults.

The order of sources in ``settings_customise_sources`` (in :func:`_sources_class`) *is*
the precedence: values passed in (the command line's options) win over ``PIONEER_*``
environment variables, which win over the deployment file, which wins over the defaults
below. Which deployment file is read is asked for, never guessed behind a caller's back:

- ``PioneerSettings()`` reads the environment and the file ``PIONEER_CONFIG`` names, if
  any; a library caller who builds a :class:`~pioneer.PromptCompiler` without settings
  gets exactly this.
- :meth:`PioneerSettings.load` (what the ``pioneer`` command runs) also reads a given
  ``config_file`` (``--config``) or, without one, the first ``pioneer.toml`` found in the
  working folder or one of its parents, as ruff and pytest find theirs.

A *discovered* file (found by that search, not named) is trusted less than a named one,
since it may come with a repository someone else wrote: it may set only
:data:`DISCOVERED_SETTINGS` (``locked`` only to true: see :data:`DISCOVERED_VALUES`), and
its paths only inside its own folder. The store URL, the
summarizer's endpoint and the name of its key's variable come from the environment, the
command line or a named file alone (docs/profiles.md, "A discovered pioneer.toml").

Relative paths inside the file are relative to the file, and ``~`` is expanded. The
search paths (``PIONEER_PROFILE_PATH``, ``PIONEER_TEMPLATE_PATH``) take
``os.pathsep``-separated folders or a JSON list. Every problem is a
:class:`~pioneer.errors.InputError` naming the file and line (docs/cli.md).

:class:`PioneerSettings` is the one model of the settings (fields, checks, defaults). The
sources are read by pydantic-settings, whose import (asyncio, dotenv and every source it
ships) is a large part of a short command's start-up, so it is imported only when there
is a source to read: a ``PIONEER_*`` variable or a deployment file. With
neither, the sources would add nothing to the values passed in, and the model validates
those and its defaults directly (docs/speed.md).
"""

from __future__ import annotations

import contextvars
import functools
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from .documents import TomlLines, parse_document, read_text
from .errors import InputError, Problem, did_you_mean, format_path
from .tokens import TOKEN_CACHE_BYTES

__all__ = [
    "CLOCK_GRANULARITIES", "CONFIG_FILE", "CONFIG_VARIABLE", "DISCOVERED_SETTINGS",
    "DISCOVERED_VALUES",
    "ENV_PREFIX", "ClockGranularity", "HistoryToolRounds", "PioneerSettings", "default_home",
    "find_config",
    "store_url_parameters",
]

#: Prefix of the environment variables read (matched in any case).
ENV_PREFIX = "PIONEER_"
#: The deployment file's name, looked for in the working folder and its parents.
CONFIG_FILE = "pioneer.toml"
#: The variable that names a deployment file explicitly.
CONFIG_VARIABLE = f"{ENV_PREFIX}CONFIG"
#: The runtime home's folder under the user's home unless ``home`` says otherwise.
DEFAULT_HOME_DIRECTORY = ".pioneer"
#: How finely the runtime block tells the time: it is cut down to the start of the minute,
#: hour or day, so its text stays byte-identical within one (docs/compile-input-and-manifest.md).
ClockGranularity = Literal["minute", "hour", "day"]
CLOCK_GRANULARITIES: tuple[ClockGranularity, ...] = ("minute", "hour", "day")
#: What a stored turn keeps for later turns: the user message and the final answer
#: (``drop``), or its tool calls and results too (``keep``; docs/history.md, "Tool rounds").
HistoryToolRounds = Literal["drop", "keep"]
#: A mebibyte, the unit the cache budgets' defaults are written in.
MiB = 1 << 20
#: Default budget of a store's cache of turns (kept below the settings' layer).
HISTORY_CACHE_BYTES = 160 * MiB
#: Default of ``tool_result_clear_batch_tokens``: clearing a tool result rewrites the
#: cached request from that result on, so results are cleared this many tokens at a time
#: at least (docs/history.md, "A turn that grows past the window").
TOOL_RESULT_CLEAR_BATCH_TOKENS = 10_000

# The deployment file one construction reads: set by ``load`` around it.
_CONFIG: contextvars.ContextVar[Path | None] = contextvars.ContextVar("config", default=None)
# Whether that file was discovered (found in the working folder or a parent), not named.
_DISCOVERED: contextvars.ContextVar[bool] = contextvars.ContextVar("discovered", default=False)

#: The steps one template render may take by default (the ``render_step_limit`` setting;
#: docs/failure-behaviour.md, "Templates"): well past any profile pioneer ships, and about
#: a second of the slowest steps (macro calls).
RENDER_STEP_LIMIT = 250_000

#: The settings a discovered ``pioneer.toml`` may set: none of them can send anything
#: outside the deployment (its paths must lie inside the file's folder). Every other
#: setting (the store URL, the summarizer's endpoint and key variable, where the runtime
#: home is looked for) comes from the environment, the command line or a named file.
DISCOVERED_SETTINGS = frozenset({
    "profile_path", "template_path", "home", "store_path", "max_context_tokens",
    "response_reserve_tokens", "summary_model", "summary_timeout", "dynamic_placement",
    "truncate_low_water", "keep_recent_tokens", "clock_granularity", "model_path",
    "history_tool_rounds", "tool_result_clear_batch_tokens", "locked",
})
#: The only values a discovered file may give some of those settings: it may turn the lock
#: on, never off (the lock file it is checked against, ``lock_file``, is not settable by a
#: discovered file at all, so a repository cannot point the check at a lock of its own).
DISCOVERED_VALUES: Mapping[str, tuple[object, ...]] = {"locked": (True,)}


def default_home(home_directory: str | os.PathLike[str] = DEFAULT_HOME_DIRECTORY) -> Path:
    """The runtime home when ``home`` is not set: the user's home joined with
    ``home_directory`` (``~/.pioneer`` by default)."""
    return Path.home() / home_directory


def find_config(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The first ``pioneer.toml`` in ``start`` (default: the working folder) or a parent.

    The path is relative to the working folder (``pioneer.toml``, ``../pioneer.toml``)
    when it can be, so that messages, and paths read from the file, stay as short as the
    user would write them.
    """
    here = Path(os.getcwd())
    folder = Path(start) if start is not None else here
    for candidate in [folder, *folder.absolute().parents]:
        path = candidate / CONFIG_FILE
        try:
            if path.is_file():
                return Path(os.path.relpath(path, here)) if path.is_absolute() else path
        except (OSError, ValueError):
            continue
    return None


class PioneerSettings(BaseModel):
    """Deployment settings for the compiler, the runtime home and the history budget."""

    # hide_input_in_errors: a refused store URL is never echoed (it may hold a password).
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              hide_input_in_errors=True)
    # False on the derived class through which pydantic-settings reads the sources.
    _reads_sources: ClassVar[bool] = True

    home: Path = Field(
        default=None,  # type: ignore[assignment]  # filled in from home_directory
        description="Runtime home folder (default: the user's home joined with "
        "home_directory).",
    )
    home_directory: str = Field(
        default=DEFAULT_HOME_DIRECTORY, min_length=1,
        description="The runtime home's folder under the user's home, when home is not set.",
    )
    # Taken from the environment as written and split by ``_split_search_path``, not as JSON.
    profile_path: list[Path] = Field(
        default_factory=list,
        description="Deployment profile folders, searched before the built-in profiles.",
    )
    template_path: list[Path] = Field(
        default_factory=list,
        description="Deployment template folders, searched before the built-in templates.",
    )
    max_context_tokens: int | None = Field(
        default=None, ge=1,
        description="The context window every request must fit, overriding the model's "
        "context_window from the model table (unset: the model's window).",
    )
    response_reserve_tokens: int = Field(
        default=16_000, ge=0,
        description="Tokens kept free for the model's reply when a request sets no "
        "max_tokens (with max_tokens, that is the reserve).",
    )
    tool_result_clear_batch_tokens: int = Field(
        default=TOOL_RESULT_CLEAR_BATCH_TOKENS, ge=1,
        description="Least tokens of this turn's oldest tool results cleared at once when "
        "the turn's rounds would overflow the window, so a cleared prefix is rewritten "
        "rarely.",
    )
    summary_model: str | None = Field(
        default=None, description="Model that writes history summaries."
    )
    summary_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible base URL for history summaries (…/v1); none: off.",
    )
    summary_api_key_env: str = Field(
        default="OPENAI_API_KEY",
        description="Environment variable holding the summary endpoint's key.",
    )
    summary_timeout: float = Field(
        default=30.0, gt=0, description="Seconds before a summary request is abandoned."
    )
    summary_allow_http: bool = Field(
        default=False,
        description="Send the summary key to a plain http:// endpoint (refused otherwise: "
        "the key would cross the network, and any http_proxy, in the clear).",
    )
    store_path: Path | None = Field(
        default=None, description="SQLite conversation store; defaults to <home>/pioneer.db."
    )
    dynamic_placement: Literal["cache-first", "system"] = Field(
        default="cache-first",
        description="Where provider requests put the dynamic text: after the history "
        "(cache-first) or in the system prompt (system, the bodies of earlier versions).",
    )
    truncate_low_water: float = Field(
        default=0.6, gt=0, le=1,
        description="Share of the history budget truncation cuts back to, so following "
        "turns only append to the kept history.",
    )
    keep_recent_tokens: int = Field(
        default=0, ge=0,
        description="Tokens of the newest turns kept verbatim after a new summary (0: the "
        "summary message alone).",
    )
    history_tool_rounds: HistoryToolRounds = Field(
        default="drop",
        description="What a stored turn keeps for later turns: drop (the user message and "
        "the final answer only, the cheapest) or keep (its tool calls and results too, "
        "sent in each provider's own shape and counted in the history budget).",
    )
    store_url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL conversation store (postgresql://…); wins over store_path. "
        "A secret: printed as '**********' (read it with get_secret_value()).",
    )
    postgres_lock_timeout: float = Field(
        default=10.0, gt=0,
        description="Seconds a PostgreSQL write waits for a thread another writer holds "
        "before it fails (lock_timeout).",
    )
    postgres_statement_timeout: float = Field(
        default=30.0, gt=0,
        description="Seconds a PostgreSQL statement may run before the server stops it "
        "(statement_timeout).",
    )
    postgres_idle_in_transaction_timeout: float = Field(
        default=5.0, gt=0,
        description="Seconds the PostgreSQL server lets a session sit idle inside a "
        "transaction before it ends the session and frees its locks "
        "(idle_in_transaction_session_timeout).",
    )
    clock_granularity: ClockGranularity = Field(
        default="hour",
        description="How finely the runtime block tells the local time (minute, hour or "
        "day); the time is cut down to it, so the block changes at most that often.",
    )
    model_path: list[Path] = Field(
        default_factory=list,
        description="Deployment model tables (TOML files, or folders holding models.toml), "
        "laid over the built-in model table; an earlier one wins.",
    )
    locked: bool = Field(
        default=False,
        description="Refuse a profile whose sources differ from the lock file (lock_file), "
        "as pioneer compile --locked does: an Agent checks its profiles when it is built "
        "and when it reloads them.",
    )
    lock_file: Path = Field(
        default=Path("pioneer.lock"),
        description="The lock file pioneer lock writes and locked checks (relative: to the "
        "working folder, or to the settings file that sets it).",
    )

    # Cache budgets, in bytes (docs/speed.md, "Caches"): sized for a node serving 10,000
    # threads from one process.
    history_cache_bytes: int = Field(
        default=HISTORY_CACHE_BYTES, ge=0,
        description="Bytes of stored turns a history store keeps in memory.",
    )
    token_cache_bytes: int = Field(
        default=TOKEN_CACHE_BYTES, ge=0,
        description="Bytes of token counts the process-wide counter keeps (320 a count).",
    )

    render_step_limit: int = Field(
        default=RENDER_STEP_LIMIT, ge=1,
        description="Steps one template render may take (loop iterations and calls; a call "
        "handed a long list or text more) before it stops with a TemplateError.",
    )

    def __init__(self, **values: Any) -> None:
        """``values`` (the command line's options), then the environment and the
        deployment file, then the defaults."""
        if self._reads_sources and _something_to_read():
            values = _read_sources(type(self), values)
        try:
            super().__init__(**values)
        except ValidationError as error:  # every problem located, never pydantic's own error
            raise InputError(list(_problems(error, type(self).model_fields))) from None

    @field_validator("store_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            store_url_parameters(value.get_secret_value())
        return value

    @model_validator(mode="before")
    @classmethod
    def _home_from_directory(cls, data: Any) -> Any:
        # An empty home (PIONEER_HOME="") is no home: the default, as for an unset
        # variable, never the working folder (docs/profiles.md).
        if isinstance(data, dict) and data.get("home") in (None, ""):
            directory = data.get("home_directory", DEFAULT_HOME_DIRECTORY)
            if isinstance(directory, str) and directory:
                data = {**data, "home": default_home(directory)}
        return data

    @field_validator("profile_path", "template_path", "model_path", mode="before")
    @classmethod
    def _split_search_path(cls, value: object) -> object:
        if isinstance(value, str):  # from the environment
            text = value.strip()
            if text.startswith("["):
                return parse_document(text, "the environment", "json")
            return [part for part in text.split(os.pathsep) if part]
        return value

    @property
    def database(self) -> Path:
        """The conversation store path."""
        return self.store_path or self.home / "pioneer.db"

    @classmethod
    def load(
        cls, config_file: str | os.PathLike[str] | None = None, *, discover: bool = True,
        discover_from: str | os.PathLike[str] | None = None, **overrides: Any,
    ) -> PioneerSettings:
        """Settings as the ``pioneer`` command reads them: ``overrides``, the environment,
        ``config_file`` (else ``PIONEER_CONFIG``'s file, else with ``discover`` the first
        ``pioneer.toml`` in ``discover_from`` (default: the working folder) or a parent),
        defaults. Every problem, in the file or in a variable, is one
        :class:`~pioneer.errors.InputError`."""
        named = Path(config_file) if config_file is not None else None
        if named is not None and not named.is_file():
            raise InputError(Problem("config file not found", file=str(named)))
        found = None
        if named is None and discover and _named_config() is None:
            found = find_config(discover_from)
        token = _CONFIG.set(named or found)
        discovered = _DISCOVERED.set(found is not None)
        try:
            return cls(**overrides)
        finally:
            _DISCOVERED.reset(discovered)
            _CONFIG.reset(token)


_PATH_KEYS = ("home", "store_path", "profile_path", "template_path", "model_path", "lock_file")
#: Where each key of the deployment file was read: (file, text), for error lines.
_READ: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "read", default=None
)


def _something_to_read() -> bool:
    """Whether a source could add a value: a deployment file to read (``load`` found or
    was given one) or a ``PIONEER_*`` variable (``PIONEER_CONFIG`` among them)."""
    if _CONFIG.get() is not None:
        return True
    return any(name.upper().startswith(ENV_PREFIX) for name in os.environ)


def _read_sources(model: type[PioneerSettings], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` merged with what the environment and the deployment file set, checked.

    pydantic-settings reads and merges the sources into an instance of a class derived
    from ``model`` (so every field and check is the model's own); the values it set are
    then taken over as they were validated.
    """
    # The file read is noted for this construction's error lines only, and forgotten after
    # it: a later construction (without the file) must not locate its errors there.
    token = _READ.set(None)
    try:
        read = _sources_class(model)(**values)
    finally:
        _READ.reset(token)
    return {name: getattr(read, name) for name in read.model_fields_set}


@functools.cache
def _sources_class(model: type[PioneerSettings]) -> type[PioneerSettings]:
    """``model`` with the sources, made on first use."""
    from pydantic_settings import (
        BaseSettings,
        PydanticBaseSettingsSource,
        SettingsConfigDict,
        TomlConfigSettingsSource,
    )

    class DeploymentFile(TomlConfigSettingsSource):
        """``pioneer.toml``: every problem located, relative paths relative to the file."""

        def _read_file(self, file_path: Any) -> dict[str, Any]:
            text, name = read_text(str(file_path), "config file")
            data: dict[str, Any] = parse_document(text, name, "toml")
            _READ.set((name, text))
            known = model.model_fields
            unknown = [key for key in data if key not in known]
            if unknown:
                lines = TomlLines(text)
                raise InputError([
                    Problem(f"unknown key{did_you_mean(key, known) or _known(known)}",
                            file=name, line=lines.line([key]), path=key)
                    for key in unknown
                ])
            folder = Path(str(file_path)).parent
            for key in _PATH_KEYS:
                if key in data:
                    data[key] = _rebase(data[key], folder)
            if _DISCOVERED.get():
                _check_discovered(data, name, text, folder)
            return data

    class Sources(BaseSettings, model):  # type: ignore[valid-type,misc]
        # enable_decoding off: the search paths are taken from the environment as written
        # and split by ``_split_search_path``, not parsed as JSON (no other field is a list).
        model_config = SettingsConfigDict(
            env_prefix=ENV_PREFIX, env_nested_delimiter="__", enable_decoding=False,
            title=model.__name__,
        )
        _reads_sources: ClassVar[bool] = False

        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            """The precedence: the values passed in, the environment, the deployment file."""
            sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
            config_file = _config_file()
            if config_file is not None:
                sources.append(DeploymentFile(settings_cls, toml_file=config_file))
            return tuple(sources)

    return Sources


def _named_config() -> str | None:
    """The file ``PIONEER_CONFIG`` names (the variable matched in any case), if any."""
    return os.environ.get(CONFIG_VARIABLE) or next(
        (value for name, value in os.environ.items() if name.upper() == CONFIG_VARIABLE),
        None,
    )


def _check_discovered(data: Mapping[str, Any], name: str, text: str, folder: Path) -> None:
    """Refuse what a discovered file may not set: a setting outside
    :data:`DISCOVERED_SETTINGS`, or a path outside the file's folder."""
    problems = []
    inside = folder.resolve()
    lines = TomlLines(text)  # indexed for a first problem only
    for key, value in data.items():
        if key not in DISCOVERED_SETTINGS:
            problems.append(Problem(
                "a pioneer.toml found in the working folder or a parent may not set this "
                "(it could send data or a secret outside the deployment): set it in the "
                f"environment ({ENV_PREFIX}{key.upper()}), on the command line, or in a file "
                f"named by --config or {CONFIG_VARIABLE}", file=name, line=lines.line([key]),
                path=key))
            continue
        allowed = DISCOVERED_VALUES.get(key)
        if allowed is not None and value not in allowed:
            problems.append(Problem(
                f"a pioneer.toml found in the working folder or a parent may set this only to "
                f"{' or '.join(_toml_value(v) for v in allowed)}: set it in the environment "
                f"({ENV_PREFIX}{key.upper()}), on the command line, or in a file named by "
                f"--config or {CONFIG_VARIABLE}", file=name, line=lines.line([key]), path=key))
            continue
        if key in _PATH_KEYS:
            for path in value if isinstance(value, list) else [value]:
                if isinstance(path, str) and not Path(path).resolve().is_relative_to(inside):
                    problems.append(Problem(
                        f"{path} is outside {folder or '.'}: a pioneer.toml found in the working "
                        "folder or a parent may name paths inside its own folder only (name the "
                        f"file with --config or {CONFIG_VARIABLE} to trust it)",
                        file=name, line=lines.line([key]), path=key))
    if problems:
        raise InputError(problems)


def _toml_value(value: object) -> str:
    """``value`` as TOML writes it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _config_file() -> Path | None:
    """The deployment file to read: the one ``load`` set, else ``PIONEER_CONFIG``'s."""
    config_file = _CONFIG.get()
    named = _named_config()
    if config_file is None and named:
        config_file = Path(named).expanduser()
        if not config_file.is_file():
            raise InputError(
                Problem(f"{CONFIG_VARIABLE} names {config_file}, which is not a file")
            )
    return config_file


def _known(names: Mapping[str, Any]) -> str:
    return f" (known: {', '.join(names)})"


def _rebase(value: Any, folder: Path) -> Any:
    if isinstance(value, list):
        return [_rebase(item, folder) for item in value]
    if isinstance(value, str) and value:
        path = Path(value).expanduser()
        return str(path if path.is_absolute() else folder / path)
    return value


def _problems(error: ValidationError, known: Mapping[str, Any]) -> Iterator[Problem]:
    read = _READ.get()
    in_file = _keys(read[1]) if read is not None else frozenset()
    lines = TomlLines(read[1]) if read is not None else None
    for item in error.errors():
        parts = [part for part in item["loc"] if part != ""]
        message = str(item["msg"])
        if item["type"] == "extra_forbidden":
            message = f"unknown setting{did_you_mean(str(parts[0]), known)}"
        path = format_path(parts)
        if read is not None and lines is not None and parts and str(parts[0]) in in_file:
            yield Problem(message, file=read[0], line=lines.line(parts), path=path)
        else:
            yield Problem(message, path=f"settings → {path}")


def _keys(text: str) -> frozenset[str]:
    """The top-level keys of a deployment file's text (none when it does not parse)."""
    try:
        return frozenset(parse_document(text, "", "toml"))
    except InputError:
        return frozenset()


#: URL schemes of a PostgreSQL store.
STORE_URL_SCHEMES = ("postgresql", "postgres")
# libpq echoes the text it could not parse, in quotes; none of it may reach a message.
_ECHO = re.compile(r'(?: after|:)? "[^"]{2,}"')


def store_url_parameters(url: str) -> dict[str, str]:
    """The connection parameters of a ``postgresql://`` URL, read by libpq's own parser
    (psycopg's ``conninfo_to_dict``); a :class:`ValueError` naming what is wrong, never
    the URL's text. Without psycopg (the ``postgres`` extra) only the scheme is checked."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in STORE_URL_SCHEMES:
        raise ValueError("expected a postgresql:// URL")
    try:
        from psycopg import Error
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return {}
    try:
        parameters = conninfo_to_dict(f"{scheme.lower()}://{rest}")
    except Error as error:
        reason = _ECHO.sub("", str(error).strip().splitlines()[0]).rstrip(": ")
        raise ValueError(f"not a valid PostgreSQL URL ({reason})") from None
    port = str(parameters.get("port", ""))
    if port and not all(part.isdigit() for part in port.split(",")):
        raise ValueError("not a valid PostgreSQL URL (the port is not a number; a '/', '@' "
                         "or ':' in a password is written %2F, %40, %3A)")
    return {key: str(value) for key, value in parameters.items()}
