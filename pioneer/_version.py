"""The package version, in a module of its own so ``pioneer --version`` imports nothing else."""

VERSION = "0.1.0"
