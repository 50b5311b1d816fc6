"""textnb forget: remove messages' contribution from a model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ._util import (
    IndexOpt,
    JsonOpt,
    ModelOpt,
    Progress,
    StoreModelOpt,
    StoreOpt,
    StrictOpt,
    TsvOpt,
    app,
    check_store,
    model_to_read,
    nothing_done,
    operator_errors,
    skipping_unreadable,
)
from .retrain import WaitOpt


# fmt: off
@app.command("forget")
def forget_cli(
    sources: Optional[List[str]] = typer.Argument(None, help="The messages to forget: files, directories, mbox, Maildir, or '-'."),
    model: Optional[Path] = ModelOpt,
    index: Optional[List[str]] = IndexOpt,
    tsv: Optional[List[str]] = TsvOpt,
    wait: Optional[float] = WaitOpt,
    as_json: bool = JsonOpt,
    strict: bool = StrictOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
):
    # fmt: on
    """Forget messages: their counts leave the model exactly, as if never learned.

    Inputs that cannot be read are skipped and listed on stderr (exit 0 if any message
    was read); with --strict the first one stops the run (exit 1) and the model stays.
    """
    from ..commands import forget

    with operator_errors(), skipping_unreadable(strict) as skipped:
        progress = Progress("read")
        try:
            if check_store(store, model):
                from ..commands.shared_store import forget as store_forget

                result = store_forget(store, store_model, sources or [], index or [],
                                             tsv or [], progress=progress)
            else:
                result = forget(model_to_read(model), sources or [], index or [], tsv or [],
                                progress=progress, lock_timeout=wait)
        finally:
            progress.close()
    nothing_done(skipped, result["read"], strict)
    if as_json:
        typer.echo(json.dumps(result))
        return
    gone, n = result["forgotten"], result["messages"]
    typer.echo(f"forgot {gone['spam']:,} spam and {gone['ham']:,} ham; "
               f"{result['not_found']:,} not in the ledger")
    if result.get("pruned"):
        typer.echo(f"{result['pruned']:,} of them had tokens a size bound dropped earlier "
                   "(textnb compact --prune): the counts the model still held were removed, "
                   "the dropped ones were gone already")
    if store is not None:
        typer.echo(f"model {result['model']}: {n['spam']:,} spam, {n['ham']:,} ham; "
                   f"ledger {result['ledger']['messages']:,}")
        return
    verb = "written" if result["written"] else "unchanged"
    typer.echo(f"model {verb}: {result['model']} ({n['spam']:,} spam, {n['ham']:,} ham; "
               f"ledger {result['ledger']['messages']:,})")
