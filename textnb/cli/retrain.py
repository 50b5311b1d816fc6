"""textnb retrain: add labelled mail to a model, through its ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ._util import (
    EngineOpt,
    EngineStrictOpt,
    HamOpt,
    IndexOpt,
    JobsOpt,
    JsonOpt,
    ModelOpt,
    Progress,
    RetrainMarginOpt,
    RetrainRegimeOpt,
    SchedulerOpt,
    SpamOpt,
    StoreModelOpt,
    StoreOpt,
    TsvOpt,
    app,
    check_store,
    model_path,
    nothing_done,
    operator_errors,
    pick_engine,
    skipping_unreadable,
)

# fmt: off
WaitOpt = typer.Option(None, "--wait", help="Seconds to wait while another textnb updates the same model (default: until it is done).")


@app.command("retrain")
def retrain_cli(
    model: Optional[Path] = ModelOpt,
    spam: Optional[List[str]] = SpamOpt,
    ham: Optional[List[str]] = HamOpt,
    index: Optional[List[str]] = IndexOpt,
    tsv: Optional[List[str]] = TsvOpt,
    maildir: Optional[Path] = typer.Option(None, "--maildir", help="A Maildir (e.g. ~/Maildir): spam from its spam folder, ham from its inbox."),
    spam_folder: Optional[List[str]] = typer.Option(None, "--spam-folder", help="With --maildir: the spam folder's name (repeatable; default: the first of Junk, Spam, [Gmail]/Spam, Junk E-mail, Junk Email, Bulk Mail)."),
    ham_folder: Optional[List[str]] = typer.Option(None, "--ham-folder", help="With --maildir: a ham folder's name (repeatable; default: INBOX)."),
    regime: str = RetrainRegimeOpt,
    margin: Optional[float] = RetrainMarginOpt,
    wait: Optional[float] = WaitOpt,
    as_json: bool = JsonOpt,
    engine: str = EngineOpt,
    scheduler: Optional[str] = SchedulerOpt,
    jobs: Optional[int] = JobsOpt,
    strict: bool = EngineStrictOpt,
    store: Optional[str] = StoreOpt,
    store_model: str = StoreModelOpt,
):
    # fmt: on
    """Add labelled mail to a model: new messages are learned, known ones skipped, relabelled ones moved.

    Inputs that cannot be read are skipped and listed on stderr (exit 0 if any message
    was read); with --strict the first one stops the run (exit 1) and the model stays.
    """
    from .. import commands

    with operator_errors(), skipping_unreadable(strict) as skipped:
        if maildir is None and (spam_folder or ham_folder):
            raise typer.BadParameter("--spam-folder and --ham-folder name folders of a "
                                     "--maildir; give --maildir DIR too", param_hint="--maildir")
        chosen = pick_engine(engine, scheduler, jobs)
        progress = Progress("read")
        try:
            if check_store(store, model):
                if regime != "all" or maildir is not None or engine != "local":
                    raise typer.BadParameter("with --store, retrain learns every message "
                                             "(--regime all) from --spam/--ham/--index/--tsv, "
                                             "in this process (--engine local)",
                                             param_hint="--store")
                from ..commands.shared_store import retrain as store_retrain

                result = store_retrain(store, store_model, spam or [], ham or [],
                                              index or [], tsv or [], progress=progress)
                result.update(regime="all", known=result["duplicates"], passed=0,
                              written=True, created=False)
            else:
                result = commands.retrain(model_path(model), spam or [], ham or [], index or [],
                                          tsv or [], regime, margin, progress,
                                          lock_timeout=wait, engine=chosen, maildir=maildir,
                                          spam_folders=spam_folder or [],
                                          ham_folders=ham_folder or [])
        finally:
            progress.close()
    nothing_done(skipped, result["read"], strict)
    if as_json:
        typer.echo(json.dumps(result))
        return
    learned, moved, n = result["learned"], result["moved"], result["messages"]
    typer.echo(f"learned {learned['spam']:,} spam and {learned['ham']:,} ham "
               f"(regime {result['regime']}); moved {moved['spam']:,} to spam and "
               f"{moved['ham']:,} to ham; {result['known']:,} already known; "
               f"{result['passed']:,} passed by the regime")
    if result.get("pruned"):
        typer.echo(f"{result['pruned']:,} moved message(s) had tokens a size bound dropped "
                   "earlier (textnb compact --prune): the counts the model still held were "
                   "moved, the dropped ones stay gone")
    verb = ("created" if result["created"] else "written") if result["written"] else "unchanged"
    typer.echo(f"model {verb}: {result['model']} ({n['spam']:,} spam, {n['ham']:,} ham; "
               f"ledger {result['ledger']['messages']:,}) in {result['seconds']:.1f} s")
