"""``python -m textnb`` runs the command line."""

from .cli import main

main()
