"""Settings: environment, then a deployment ``pioneer.toml``, then defaults.

The order of sources in :meth:`PioneerSettings.settings_customise_sources` *is* the
precedence: ``PIONEER_*`` environment variables win over the deployment file, which wins
over the defaults below. The deployment file is ``./pioneer.toml`` unless
``PIONEER_CONFIG`` names another one.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

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
    profile_path: list[Path] = Field(
        default_factory=list,
        description="Deployment profile folders, searched before the built-in profiles.",
    )
    template_path: list[Path] = Field(
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
        config_file = Path(os.environ.get("PIONEER_CONFIG", "pioneer.toml"))
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=config_file),
        )

    @property
    def database(self) -> Path:
        """The conversation store path."""
        return self.store_path or self.home / "pioneer.db"
