"""``python -m perfmodel`` runs the CLI."""

from perfmodel.cli import main

main()
