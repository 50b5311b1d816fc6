"""textnb import: a model back from a textnb PMML export or a text dump, or a model file
brought into a shared store."""

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
    model_path,
    operator_errors,
)
from .export import FORMATS, one_of

# textnb.commands.shared_store.IMPORT_FORMATS (not imported here: `textnb --help` loads
# no NumPy): a model file, into a store only, beside what `textnb export` writes.
STORE_FORMATS = ("model", *FORMATS)
ZIP_MAGIC = b"PK\x03\x04"  # every model file is a ZIP archive


def _format(value: Optional[str]) -> Optional[str]:
    return None if value is None else one_of(STORE_FORMATS, "--format", "a format textnb "
                                             "imports")(value)


def _source_format(source: Path, fmt: Optional[str], store: bool) -> str:
    """The format given, else 'model' for a model file going into a store, else pmml;
    a usage error for a model file going anywhere else."""
    if fmt is None and str(source) != "-" and _is_model_file(source):
        fmt = "model"
    if fmt == "model" and not store:
        raise typer.BadParameter(f"'{source}' is a model file, which needs no import: use it "
                                 "with --model, or bring it into a shared store with --store",
                                 param_hint="--format")
    return fmt or "pmml"


def _is_model_file(source: Path) -> bool:
    try:
        with open(source, "rb") as fh:
            return fh.read(len(ZIP_MAGIC)) == ZIP_MAGIC
    except OSError:
        return False  # the import names the file it cannot read


# fmt: off
@app.command("import")
def import_cli(
    source: Path = typer.Argument(..., help="A PMML document or text dump written by 'textnb export' ('-': standard input, text only); with --store, also a model file."),
    model: Optional[Path] = ModelOpt,
    fmt: Optional[str] = typer.Option(None, "--format", "-f", callback=_format, help="pmml, text (the format the document was exported in) or, with --store, model (a model file). Default: model for a model file going into a store, else pmml."),
    as_json: bool = JsonOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
    replace: bool = typer.Option(False, "--replace", help="With --store: replace a model of that name that the store has already (what it learned is then gone). Default: refuse."),
):
    # fmt: on
    """Import a PMML document or text dump that textnb exported as a model file (it scores
    identically), or bring a model file into a shared store (--store).

    The model file is replaced atomically. A damaged or wrongly edited text dump is
    refused with the number of the line that is wrong, and the model is left as it was.

    With --store, the model (a model file, or a dump of one) becomes the store's model in
    one transaction: every host following it scores as the file does, and its ledger
    comes along, so the messages it learned are known to the store and can be relabelled
    or forgotten with the mail. See docs/shared-store.md.
    """
    to_store = check_store(store, model)
    if replace and not to_store:
        raise typer.BadParameter("--replace goes with --store (a model file is replaced "
                                 "anyway)", param_hint="--replace")
    fmt = _source_format(source, fmt, to_store)
    with operator_errors():
        if to_store:
            from ..commands.shared_store import import_model as store_import

            summary = store_import(store, store_model, source, fmt, replace)
        else:
            from ..commands import import_model

            summary = import_model(source, model_path(model), fmt)
    if as_json:
        typer.echo(json.dumps(summary))
        return
    n = summary["messages"]
    what = (f"{summary['vocabulary_size']:,} tokens and {summary['ledger']['messages']:,} "
            "ledger entries" if to_store else f"{summary['features_kept']:,} terms")
    typer.echo(f"imported a {summary['config']['model']['event_model']} model of {what} "
               f"({n.get('spam', 0):,} spam, {n.get('ham', 0):,} ham) from {source} to "
               f"{summary['model']}")
