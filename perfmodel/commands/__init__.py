"""CLI commands, one module each; :mod:`perfmodel.cli` assembles them into one click group."""
