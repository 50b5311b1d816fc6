"""textnb filter: one message through, verdict headers added, for delivery agents."""

from __future__ import annotations

import atexit
import gc
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from ._util import CostOpt, ModelOpt, app, model_path


# fmt: off
@app.command("filter")
def filter_cli(
    model: Optional[Path] = ModelOpt,
    server: Optional[str] = typer.Option(None, "--server", help="Ask a running 'textnb serve' at this Unix socket path or HOST:PORT; score in process if it is down."),
    cost_ratio: Optional[float] = CostOpt,
    spamassassin: bool = typer.Option(False, "--spamassassin", help="Also write SpamAssassin's X-Spam-Flag: YES (spam only) and X-Spam-Status: Yes|No, so existing rules keep working."),
    always_exit_0: bool = typer.Option(False, "--always-exit-0", help="Exit 0 whatever the verdict (for agents that treat non-zero as failure); failing to write the message still exits 3."),
    timeout: float = typer.Option(10.0, "--timeout", help="With --server: seconds the whole exchange with the scorer may take before scoring in process."),
    user: Optional[str] = typer.Option(None, "--user", help="With --server: the user whose model scores the message ('textnb serve --models'), as textnb-client --user; a delivery agent passes the recipient, e.g. --user \"$LOGNAME\" in procmail."),
    key_file: Optional[Path] = typer.Option(None, "--key-file", envvar="TEXTNB_KEY_FILE", help="With --server: the scorer's shared key ('textnb serve --key-file'); each reply must prove the scorer holds it. A TCP scorer is asked only with a key or --insecure-tcp."),
    insecure_tcp: bool = typer.Option(False, "--insecure-tcp", help="With --server HOST:PORT: believe the scorer without a key (whoever binds the port while it is down is believed too)."),
    learn: bool = typer.Option(False, "--learn", help="Then train the model on the message under its verdict, as bogofilter -u (spam and ham only, through the ledger; slow: loads and rewrites the model)."),
):
    # fmt: on
    """Filter one message from stdin to stdout, adding X-TextNB-Status and X-TextNB-Score.

    Exit status: 0 spam, 1 ham, 2 unsure, 3 error (the message still goes out, unchanged).
    """
    with one_message_gc():
        code = _filter(model, server, cost_ratio, spamassassin, always_exit_0, timeout, learn,
                       user, key_file, insecure_tcp)
    raise typer.Exit(code)


_freeze_registered = False
_froze = False  # one_message_gc froze what was alive when it last returned


@contextmanager
def one_message_gc():
    """The cyclic garbage collector paused for a one-message process, and everything
    frozen before the interpreter's last collection at exit.

    What the start-up makes (modules, spaCy, the model) lives until exit, so the
    collector's passes over it during start-up, and its last collection at exit (which
    runs when the collector is on), are work with nothing to free; the garbage one
    message makes is bounded by ``tokenizer.max_tokens``
    (docs/design/startup.md#the-collector-in-a-one-message-run).

    The collector's state is restored on leaving (the command also runs inside tests),
    after freezing what is alive (``gc.freeze``): re-enabled over it, the collector's
    next pass, a young-generation one of every object made while it was paused, would
    run just before exit. The next call unfreezes it
    (tests run the command many times in one process), so garbage frozen here is
    collectable again from then on.
    """
    global _freeze_registered, _froze
    if not _freeze_registered:  # once per process (tests run the command many times)
        atexit.register(gc.freeze)
        _freeze_registered = True
    if _froze:
        gc.unfreeze()
        _froze = False
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            _froze = True
            gc.enable()


def _filter(model, server, cost_ratio, spamassassin, always_exit_0, timeout, learn,
            user=None, key_file=None, insecure_tcp=False) -> int:
    from ..delivery.client import (KeyFileError, check_user_option, client_scorer,
                                   parse_address, read_key, run_filter)
    from ..delivery.verdict_headers import in_process_scorer, learn_verdict

    path = model_path(model)
    notes: list[str] = []
    problem = None
    # Not usage errors (exit 2 means "unsure" here, and would drop the message): the
    # message goes through unchanged, exit 3, the problem on stderr.
    if cost_ratio is not None and not 0 < cost_ratio < float("inf"):
        problem = f"--cost-ratio {cost_ratio} must be > 0 and finite"
    elif user is not None and not server:
        problem = (f"--user {user!r} names a model of 'textnb serve --models': give "
                   "--server too (without it the --model file scores every user)")
    elif user is not None:
        try:
            check_user_option(user)
        except ValueError as exc:
            problem = str(exc)
    key = None
    if problem is None and server and key_file is not None:
        try:
            key = read_key(key_file)
        except KeyFileError as exc:
            problem = str(exc)
    if problem is not None:
        def score(raw):
            raise ValueError(problem)
    elif server:
        score = client_scorer(parse_address(server), path, cost_ratio, timeout, notes=notes,
                              user=user, key=key, insecure_tcp=insecure_tcp)
    else:
        score = in_process_scorer(path, cost_ratio)
    learner = (lambda raw, verdict: learn_verdict(path, raw, verdict)) if learn else None
    return run_filter(sys.stdin.buffer, sys.stdout.buffer, sys.stderr, score, spamassassin,
                      always_exit_0, notes, learner)
