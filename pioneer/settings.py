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

import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .errors import InputError, Problem, toml_problem
from .settings_values import CONFIG_FILE, CONFIG_VARIABLE, ENV_PREFIX, SettingsValues, default_home

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["PioneerSettings", "default_home"]


class PioneerSettings(BaseSettings, SettingsValues):
    """Deployment settings for the compiler, the runtime home and the history budget."""

    # The fields, their defaults and checks are SettingsValues'; this class adds the
    # sources they are read from.

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, env_nested_delimiter="__"
    )

    # Taken from the environment as written and split by ``_split_search_path``, not as JSON.
    profile_path: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Deployment profile folders, searched before the built-in profiles.",
    )
    template_path: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Deployment template folders, searched before the built-in templates.",
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
        named = os.environ.get(CONFIG_VARIABLE)
        config_file = Path(named or CONFIG_FILE).expanduser()
        if named and not config_file.is_file():
            raise InputError(Problem(f"{CONFIG_VARIABLE} names {config_file}, which is not a file"))
        return (
            init_settings,
            env_settings,
            _DeploymentFile(settings_cls, toml_file=config_file),
        )


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
