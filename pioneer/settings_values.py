"""The deployment settings' values, checks and defaults, without the code that reads them.

:class:`~pioneer.settings.PioneerSettings` adds the sources (``PIONEER_*`` variables, the
deployment file) through pydantic-settings, whose import (asyncio, dotenv and every
source it ships) is a large part of a short command's start-up. :func:`load_settings`,
which the command line calls, imports it only when there is something for it to read;
otherwise it validates the same fields here, which gives the same values.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "CONFIG_FILE",
    "CONFIG_VARIABLE",
    "ENV_PREFIX",
    "SettingsValues",
    "default_home",
    "load_settings",
]

#: Prefix of the environment variables read (matched in any case, as pydantic-settings does).
ENV_PREFIX = "PIONEER_"
#: The deployment file read from the working folder unless ``PIONEER_CONFIG`` names another.
CONFIG_FILE = "pioneer.toml"
CONFIG_VARIABLE = f"{ENV_PREFIX}CONFIG"


def default_home() -> Path:
    """``~/.pioneer``: the runtime home when nothing else is configured."""
    return Path.home() / ".pioneer"


class SettingsValues(BaseModel):
    """Deployment settings for the compiler, the runtime home and the history budget."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    home: Path = Field(default_factory=default_home, description="Runtime home folder.")
    profile_path: list[Path] = Field(
        default_factory=list,
        description="Deployment profile folders, searched before the built-in profiles.",
    )
    template_path: list[Path] = Field(
        default_factory=list,
        description="Deployment template folders, searched before the built-in templates.",
    )
    max_context_tokens: int = Field(default=128_000, ge=1, description="Model context window.")
    response_reserve_tokens: int = Field(
        default=16_000, ge=0, description="Tokens kept free for the model's reply."
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
    store_url: str | None = Field(
        default=None,
        description="PostgreSQL conversation store (postgresql://…); wins over store_path.",
    )

    @field_validator("store_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None and not value.lower().startswith(("postgresql://", "postgres://")):
            raise ValueError("expected a postgresql:// URL")
        return value

    @field_validator("profile_path", "template_path", mode="before")
    @classmethod
    def _split_search_path(cls, value: object) -> object:
        if isinstance(value, str):  # from the environment
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [part for part in text.split(os.pathsep) if part]
        return value

    @property
    def database(self) -> Path:
        """The conversation store path."""
        return self.store_path or self.home / "pioneer.db"


def load_settings(**overrides: Any) -> SettingsValues:
    """The values of ``PioneerSettings(**overrides)``: environment, deployment file, defaults.

    When no variable starts with ``PIONEER_`` and there is no ``./pioneer.toml``, those
    settings would hold ``overrides`` and the defaults alone, so this validates them with
    :class:`SettingsValues` and leaves pydantic-settings unimported. Otherwise it returns
    a :class:`~pioneer.settings.PioneerSettings`, errors included.
    """
    if _nothing_to_read():
        return SettingsValues(**overrides)
    from .settings import PioneerSettings

    return PioneerSettings(**overrides)


def _nothing_to_read() -> bool:
    prefix = ENV_PREFIX.lower()
    if any(name.lower().startswith(prefix) for name in os.environ):
        return False
    try:
        os.stat(CONFIG_FILE)
    except FileNotFoundError:
        return True
    except OSError:  # not reachable: pydantic-settings decides, and words any error
        pass
    return False
