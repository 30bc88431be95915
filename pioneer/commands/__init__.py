"""CLI subcommands, one module each (see :mod:`pioneer.cli`)."""
