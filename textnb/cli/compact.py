"""textnb compact: fold the model's journal into its file, optionally bounding its size."""

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
from .retrain import WaitOpt


# fmt: off
@app.command("compact")
def compact_cli(
    model: Optional[Path] = ModelOpt,
    prune: bool = typer.Option(False, "--prune", help="Also drop rare tokens: those in at most --max-df learned messages and in none of the last --keep-last (docs/model-file.md#a-bound-on-size)."),
    max_df: Optional[int] = typer.Option(None, "--max-df", min=0, help="With --prune: drop tokens held by at most this many learned messages (default 1, the bound measured in docs/model-file.md)."),
    keep_last: Optional[int] = typer.Option(None, "--keep-last", min=0, help="With --prune: keep every token of the last this many learned messages (default 2000, as measured)."),
    wait: Optional[float] = WaitOpt,
    as_json: bool = JsonOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
):
    # fmt: on
    """Rewrite a model file with its journal folded in (retrain, forget and the resident scorer append to MODEL.journal).

    With --prune, rare tokens not seen lately are dropped to bound the model's size; forget
    and relabelling stay exact for what the model still holds and report the messages
    whose dropped tokens they could not remove.

    With --store, the store's log is folded into a snapshot of the model: hosts that start
    then load it, and the records it holds are dropped.
    """
    from ..commands import compact

    with operator_errors():
        if check_store(store, model):
            if prune or max_df is not None or keep_last is not None:
                raise typer.BadParameter(
                    "--prune (with --max-df, --keep-last) bounds a model file's size, not a "
                    "shared store's; run 'textnb compact --store' without them to fold the "
                    "store's log into a snapshot", param_hint="--prune")
            from ..commands.shared_store import compact as store_compact

            result = store_compact(store, store_model)
        else:
            result = compact(model_to_read(model), prune, max_df, keep_last,
                             lock_timeout=wait)
    if as_json:
        typer.echo(json.dumps(result))
        return
    if store is not None:
        typer.echo(f"{result['model']}: " + (
            f"log folded into a snapshot at record {result['snapshot_after']:,} (the last "
            f"was at {result['snapshot_before']:,})" if result["folded"] else
            f"nothing to fold: the snapshot holds record {result['snapshot_after']:,}, "
            f"the log's last is {result['log_record']:,}"))
        return
    typer.echo(f"folded {result['journal_records']:,} journal record(s); "
               f"{result['file_bytes_before']:,} -> {result['file_bytes_after']:,} bytes")
    if result["pruned"]:
        typer.echo(f"pruned {result['tokens_before'] - result['tokens_after']:,} of "
                   f"{result['tokens_before']:,} tokens (in <= {result['max_df']} messages, "
                   f"none of the last {result['keep_last']:,})")
