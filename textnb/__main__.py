"""``python -m textnb`` runs the command line."""

from .cli import app

app()
