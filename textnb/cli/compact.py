"""textnb compact: fold the model's journal into its file, optionally bounding its size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._util import JsonOpt, ModelOpt, app, model_to_read, operator_errors
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
):
    # fmt: on
    """Rewrite a model file with its journal folded in (retrain, forget and the resident scorer append to MODEL.journal).

    With --prune, rare tokens not seen lately are dropped to bound the model's size; forget
    and relabelling stay exact for what the model still holds and report the messages
    whose dropped tokens they could not remove.
    """
    from ..commands import compact

    with operator_errors():
        result = compact(model_to_read(model), prune, max_df, keep_last, lock_timeout=wait)
    if as_json:
        typer.echo(json.dumps(result))
        return
    typer.echo(f"folded {result['journal_records']:,} journal record(s); "
               f"{result['file_bytes_before']:,} -> {result['file_bytes_after']:,} bytes")
    if result["pruned"]:
        typer.echo(f"pruned {result['tokens_before'] - result['tokens_after']:,} of "
                   f"{result['tokens_before']:,} tokens (in <= {result['max_df']} messages, "
                   f"none of the last {result['keep_last']:,})")
