"""``python -m pioneer`` runs the CLI."""

from .cli import entry

entry()
