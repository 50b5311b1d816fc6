"""textnb import: a model back from a textnb PMML export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._util import JsonOpt, ModelOpt, app, model_path, operator_errors
from .export import check_format


# fmt: off
@app.command("import")
def import_cli(
    source: Path = typer.Argument(..., help="A PMML document written by 'textnb export'."),
    model: Optional[Path] = ModelOpt,
    fmt: str = typer.Option("pmml", "--format", "-f", callback=check_format, help="Interchange format: pmml."),
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Import a PMML document that textnb exported as a model file (it scores identically)."""
    from ..pmml import import_file

    with operator_errors():
        summary = import_file(source, model_path(model))
    if as_json:
        typer.echo(json.dumps(summary))
        return
    n = summary["messages"]
    typer.echo(f"imported a {summary['config']['model']['event_model']} model of "
               f"{summary['features_kept']:,} terms ({n.get('spam', 0):,} spam, "
               f"{n.get('ham', 0):,} ham) from {source} to {summary['model']}")
