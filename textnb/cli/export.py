"""textnb export: a model as a PMML document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._util import JsonOpt, ModelOpt, app, model_path, operator_errors

FORMATS = ("pmml",)


def check_format(value: str) -> str:
    if value not in FORMATS:
        raise typer.BadParameter(f"{value!r} is not a format textnb writes; use "
                                 f"{' or '.join(FORMATS)}", param_hint="--format")
    return value


# fmt: off
@app.command("export")
def export_cli(
    out: Path = typer.Argument(..., help="The document to write (replaced atomically)."),
    model: Optional[Path] = ModelOpt,
    fmt: str = typer.Option("pmml", "--format", "-f", callback=check_format, help="Interchange format: pmml (PMML 4.4)."),
    max_features: int = typer.Option(0, "--max-features", help="Export the model pruned to its N most frequent terms (0: every kept term), for PMML consumers that cannot take ~100,000 input fields."),
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Export a model as PMML 4.4: Bernoulli as a NaiveBayesModel, multinomial as a RegressionModel.

    Inputs are one field per term, named by the token: 0/1 presence (Bernoulli) or
    textnb's feature value (multinomial); absent terms may be left out of a record.
    """
    from ..pmml import export_file

    with operator_errors():
        summary = export_file(model_path(model), out, max_features)
    if as_json:
        typer.echo(json.dumps(summary))
        return
    typer.echo(f"exported {summary['terms']:,} terms of a {summary['event_model']} model as a PMML "
               f"{summary['pmml_model']} to {out} ({summary['size_bytes'] / 1e6:.1f} MB, "
               f"{summary['seconds']:.1f} s)")
    for note in summary["notes"]:
        typer.echo(f"note: {note}")
