"""textnb export: a model as a PMML document or as a plain-text dump."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._util import (
    JsonOpt,
    ModelOpt,
    StoreModelOpt,
    StoreOpt,
    app,
    check_store,
    model_to_read,
    operator_errors,
)

# textnb.commands.EXPORT_FORMATS (not imported here: `textnb --help` loads no NumPy).
FORMATS = ("pmml", "text")


def one_of(choices: tuple[str, ...], option: str, noun: str):
    """A typer callback that lets through only one of ``choices`` (a usage error, exit 2)."""
    def check(value: str) -> str:
        if value not in choices:
            raise typer.BadParameter(f"{value!r} is not {noun}; use {', '.join(choices)}",
                                     param_hint=option)
        return value
    return check


check_format = one_of(FORMATS, "--format", "a format textnb writes")


# fmt: off
@app.command("export")
def export_cli(
    out: Path = typer.Argument(..., help="The document to write (replaced atomically); with --format text, '-' is standard output."),
    model: Optional[Path] = ModelOpt,
    fmt: str = typer.Option("pmml", "--format", "-f", callback=check_format, help="pmml (PMML 4.4, for other engines) or text (a line-per-record dump for backups, grep and diff; docs/model-file.md)."),
    max_features: int = typer.Option(0, "--max-features", help="PMML only: export the model pruned to its N most frequent terms (0: every kept term), for PMML consumers that cannot take ~100,000 input fields."),
    as_json: bool = JsonOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
):
    # fmt: on
    """Export a model as PMML 4.4 or as a text dump that 'textnb import --format text' restores.

    PMML: Bernoulli as a NaiveBayesModel, multinomial as a RegressionModel; inputs are
    one field per term, named by the token. Text: the settings, class totals, one line
    per token with its ham, spam and message counts, and the ledger; importing it gives
    a model that scores bit for bit as this one.
    """
    if fmt == "text" and max_features:
        raise typer.BadParameter("--max-features prunes PMML documents only; a text dump "
                                 "holds the whole model", param_hint="--max-features")
    from ..commands import export

    with operator_errors():
        if check_store(store, model):
            from ..commands.shared_store import export as store_export

            summary = store_export(store, store_model, out, fmt, max_features)
        else:
            summary = export(model_to_read(model), out, fmt, max_features)
    if as_json:
        typer.echo(json.dumps(summary), err=str(out) == "-")
        return
    if fmt == "text":
        # With OUT '-' the dump is on stdout: the summary goes to stderr.
        typer.echo(f"exported {summary['tokens']:,} tokens and {summary['ledger']:,} ledger "
                   f"entries as text to {out} ({summary['size_bytes'] / 1e6:.1f} MB, "
                   f"{summary['seconds']:.1f} s)", err=str(out) == "-")
        return
    typer.echo(f"exported {summary['terms']:,} terms of a {summary['event_model']} model as a PMML "
               f"{summary['pmml_model']} to {out} ({summary['size_bytes'] / 1e6:.1f} MB, "
               f"{summary['seconds']:.1f} s)")
    for note in summary["notes"]:
        typer.echo(f"note: {note}")
