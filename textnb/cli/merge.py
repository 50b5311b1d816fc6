"""textnb merge: several models into one, as if trained on all of their mail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ._util import IndexOpt, JsonOpt, ModelOpt, app, model_path, operator_errors
from .export import one_of
from .retrain import WaitOpt


# textnb.modelfile.merge.CONFLICT_POLICIES (not imported here: `textnb --help` loads no NumPy).
CONFLICTS = ("refuse", "first", "last", "drop")


# fmt: off
@app.command("merge")
def merge_cli(
    inputs: List[Path] = typer.Argument(..., help="Two or more model files trained with the same settings."),
    model: Optional[Path] = ModelOpt,
    mail: Optional[List[str]] = typer.Option(None, "--mail", help="Mail holding the messages learned by more than one input (files, directories, mbox, Maildir; repeatable): each is then counted once."),
    index: Optional[List[str]] = IndexOpt,
    on_conflict: str = typer.Option("refuse", "--on-conflict", callback=one_of(CONFLICTS, "--on-conflict", "a policy"), help="A message learned as spam by one input and ham by another: refuse (list them, write nothing), first or last (keep that input's label), drop (forget it)."),
    wait: Optional[float] = WaitOpt,
    as_json: bool = JsonOpt,
):
    # fmt: on
    """Merge models into --model: counts added, ledgers united, each message counted once.

    Settings must be equal (a difference is named). A message in several inputs is
    found in --mail/--index and counted once; under different labels it is refused
    unless --on-conflict says which label wins. See docs/model-file.md.
    """
    from ..commands import merge

    if len(inputs) < 2:
        raise typer.BadParameter(f"give two or more models to merge, got {len(inputs)}",
                                 param_hint="INPUTS")
    out = model_path(model)
    with operator_errors():
        result = merge(inputs, out, mail or [], index or [], on_conflict, lock_timeout=wait)
    if as_json:
        typer.echo(json.dumps(result))
        return
    n = result["messages"]
    typer.echo(f"merged {len(inputs)} models into {out}: {n['spam']:,} spam, {n['ham']:,} ham, "
               f"{result['vocabulary_size']:,} tokens, ledger {result['ledger']['messages']:,}")
    if result["duplicates"]:
        typer.echo(f"{result['duplicates']:,} message(s) were in more than one input under one "
                   "label: counted once")
    if result["conflicts"]:
        typer.echo(f"{result['conflicts']:,} message(s) were in the inputs under different "
                   f"labels: {result['conflicts_settled']}")
    for note in result["notes"]:
        typer.echo(f"note: {note}")
