"""textnb import: a model back from a textnb PMML export or a text dump."""

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
    source: Path = typer.Argument(..., help="A PMML document or text dump written by 'textnb export' ('-': standard input, text only)."),
    model: Optional[Path] = ModelOpt,
    fmt: str = typer.Option("pmml", "--format", "-f", callback=check_format, help="pmml or text (the format the document was exported in)."),
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Import a PMML document or text dump that textnb exported as a model file (it scores identically).

    The model file is replaced atomically. A damaged or wrongly edited text dump is
    refused with the number of the line that is wrong, and the model is left as it was.
    """
    from ..commands import import_model

    with operator_errors():
        summary = import_model(source, model_path(model), fmt)
    if as_json:
        typer.echo(json.dumps(summary))
        return
    n = summary["messages"]
    typer.echo(f"imported a {summary['config']['model']['event_model']} model of "
               f"{summary['features_kept']:,} terms ({n.get('spam', 0):,} spam, "
               f"{n.get('ham', 0):,} ham) from {source} to {summary['model']}")
