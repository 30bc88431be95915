"""Settings: environment, then a deployment ``pioneer.toml``, then defaults.

The order of sources in :meth:`PioneerSettings.settings_customise_sources` *is* the
precedence: ``PIONEER_*`` environment variables win over the deployment file, which wins
over the defaults below (and the command line's options win over all three). The
deployment file is ``./pioneer.toml`` unless ``PIONEER_CONFIG`` names another one;
relative paths inside it are relative to the file, and ``~`` is expanded. The search
paths (``PIONEER_PROFILE_PATH``, ``PIONEER_TEMPLATE_PATH``) take ``os.pathsep``-separated
folders or a JSON list.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .errors import InputError, Problem, toml_problem

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["PioneerSettings", "default_home"]


def default_home() -> Path:
    """``~/.pioneer``: the runtime home when nothing else is configured."""
    return Path.home() / ".pioneer"


class PioneerSettings(BaseSettings):
    """Deployment settings for the compiler, the runtime home and the history budget."""

    model_config = SettingsConfigDict(
        env_prefix="PIONEER_", extra="forbid", frozen=True, env_nested_delimiter="__"
    )

    home: Path = Field(default_factory=default_home, description="Runtime home folder.")
    profile_path: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Deployment profile folders, searched before the built-in profiles.",
    )
    template_path: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Deployment template folders, searched before the built-in templates.",
    )
    max_context_tokens: int = Field(128_000, ge=1, description="Model context window.")
    response_reserve_tokens: int = Field(
        16_000, ge=0, description="Tokens kept free for the model's reply."
    )
    summary_model: str | None = Field(None, description="Model that writes history summaries.")
    summary_base_url: str | None = Field(
        None, description="OpenAI-compatible base URL for history summaries (…/v1); none: off."
    )
    summary_api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable holding the summary endpoint's key."
    )
    summary_timeout: float = Field(
        30.0, gt=0, description="Seconds before a summary request is abandoned."
    )
    store_path: Path | None = Field(
        None, description="SQLite conversation store; defaults to <home>/pioneer.db."
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        named = os.environ.get("PIONEER_CONFIG")
        config_file = Path(named or "pioneer.toml").expanduser()
        if named and not config_file.is_file():
            raise InputError(Problem(f"PIONEER_CONFIG names {config_file}, which is not a file"))
        return (
            init_settings,
            env_settings,
            _DeploymentFile(settings_cls, toml_file=config_file),
        )

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


_PATH_KEYS = ("home", "store_path", "profile_path", "template_path")


class _DeploymentFile(TomlConfigSettingsSource):
    """``pioneer.toml``: syntax errors are located, relative paths are relative to the file."""

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        try:
            data: dict[str, Any] = tomllib.loads(file_path.read_text("utf-8"))
        except tomllib.TOMLDecodeError as error:
            raise InputError(toml_problem(error, str(file_path))) from None
        folder = Path(str(file_path)).parent
        for key in _PATH_KEYS:
            if key in data:
                data[key] = _rebase(data[key], folder)
        return data


def _rebase(value: Any, folder: Path) -> Any:
    if isinstance(value, list):
        return [_rebase(item, folder) for item in value]
    if isinstance(value, str):
        path = Path(value).expanduser()
        return str(path if path.is_absolute() else folder / path)
    return value
