"""Shared pieces of the command line: the app, common options, error handling, progress.

This package is the only place that prints, exits, or turns domain errors into
messages and exit codes: 1 for an operator error (a missing or damaged model, an
unreadable or badly formed source, a bad config value, a read-only or full disk),
2 for bad usage (an option's value out of range, via typer). Batch commands skip
inputs that cannot be read and report them on stderr at the end, exit 0 when
something was done; ``--strict`` makes the first one an operator error.
"""

from __future__ import annotations

import inspect
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperOption

from .. import __version__
from ..errors import TextnbError, write_fix


def _unwrapped(doc: str) -> str:
    """A docstring's paragraphs each on one line: typer's rich help keeps the line breaks
    of every paragraph but the first, which then cut sentences mid-phrase at any width."""
    return "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", doc.strip()))


class _App(typer.Typer):
    """typer's app, with each command's help taken from its docstring, unwrapped."""

    def command(self, name: Optional[str] = None, **kwargs):
        register = super().command

        def decorator(f):
            if kwargs.get("help") is None and f.__doc__:
                kwargs["help"] = _unwrapped(inspect.getdoc(f))
            return register(name, **kwargs)(f)
        return decorator


def _flag_type(display_type_rich):
    """typer's rich help shows a type beside every option, flags too ('--json <bool>'),
    which reads as if the flag took a value; click's plain help shows none for a flag."""
    def shown(self, ctx):
        return None if self.is_flag and not self.count else display_type_rich(self, ctx)
    return shown


if hasattr(TyperOption, "display_type_rich"):  # the typers that show it (0.2x)
    TyperOption.display_type_rich = _flag_type(TyperOption.display_type_rich)

app = _App(
    name="textnb",
    help="A cost-aware naive Bayes spam filter: train on your spam and ham, classify new mail.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# fmt: off
ModelOpt = typer.Option(None, "--model", "-m", help="Model file. Default: $TEXTNB_MODEL or ~/.local/share/textnb/model.tnb.")
SpamOpt = typer.Option(None, "--spam", help="Spam source: a file, directory, mbox, Maildir or '-' (repeatable).")
HamOpt = typer.Option(None, "--ham", help="Ham source: a file, directory, mbox, Maildir or '-' (repeatable).")
IndexOpt = typer.Option(None, "--index", help="Index file of 'spam PATH' / 'ham PATH' lines, paths relative to it (repeatable).")
TsvOpt = typer.Option(None, "--tsv", help="File of 'label<TAB>text' lines, as the SMS Spam Collection (repeatable).")
CostOpt = typer.Option(None, "--cost-ratio", "-r", help="Cost of losing a ham / cost of letting a spam through (λ): spam when log-odds > ln λ.")
JsonOpt = typer.Option(False, "--json", help="JSON output, for scripts.")
RegimeOpt = typer.Option(None, "--regime", help="Which messages to learn, in the order given: thick (those the model of the messages before gets wrong or right by less than --margin), all, or error (only those it gets wrong or is unsure of). Default: training.regime, thick (a --spam and a --ham pile in the order they arrived in; every message from mbox piles, on --engine dask or into a --store).")
MarginOpt = typer.Option(None, "--margin", help="Log-odds margin of --regime thick (default: training.margin, 40; configs/default.toml says how it was chosen).")
RetrainRegimeOpt = typer.Option("all", "--regime", help="Which new messages to learn, in the order given (a --spam and a --ham pile: in the order they arrived in): all, error (only those the model of the messages before gets wrong or is unsure of) or thick (also those right by less than --margin).")
RetrainMarginOpt = typer.Option(None, "--margin", help="Log-odds margin of --regime thick (default 40, chosen with bench/online.py).")
StrictOpt = typer.Option(False, "--strict", help="Stop at the first input that cannot be read (exit 1, the model untouched), and fail when no message was read. Default: skip such inputs and list them on stderr at the end.")
EngineStrictOpt = typer.Option(False, "--strict", help="Stop at the first input that cannot be read (exit 1, the model untouched), and fail when no message was read. Default: skip such inputs and list them on stderr at the end (with --engine dask, a file a worker cannot read still stops the run).")
JobsOpt = typer.Option(None, "--jobs", "-j", min=1, help="With --engine local: worker processes that parse, tokenise and count or score mail (default: every core); results do not depend on N.")
EngineOpt = typer.Option("local", "--engine", help="Where the work runs: local (processes on this machine) or dask (a Dask cluster; pip install 'textnb\\[dask]').")
SchedulerOpt = typer.Option(None, "--scheduler", help="With --engine dask: the scheduler's address (tcp://HOST:8786) or scheduler file. Default: $DASK_SCHEDULER_ADDRESS, else a cluster of this machine's cores.")
StoreOpt = typer.Option(None, "--store", envvar="TEXTNB_STORE", show_envvar=False, help="A shared store instead of a model file: postgresql://USER@HOST/DATABASE (several hosts share its models; docs/shared-store.md). Default: $TEXTNB_STORE.")
StoreModelOpt = typer.Option("default", "--store-model", envvar="TEXTNB_STORE_MODEL", show_envvar=False, help="With --store: the model's name in the store (one per user, say). Default: $TEXTNB_STORE_MODEL, else 'default'.")
# fmt: on


def check_store(store: Optional[str], model: Optional[Path]) -> bool:
    """Whether a --store was given; a usage error when --model was given too."""
    if store is None:
        return False
    if model is not None:
        raise typer.BadParameter("give --model (a model file) or --store (a shared store), "
                                 "not both", param_hint="--store")
    return True


def stored_model_name(store: str, name: str) -> str:
    """A shared store's model as messages name it (the URL's password hidden)."""
    from ..modelfile.postgres.schema import shown_url

    return f"{shown_url(store)} model '{name}'"


@contextmanager
def operator_errors():
    """Turn domain errors into a one-line message on stderr and exit code 1."""
    try:
        yield
    except TextnbError as exc:
        typer.echo(f"textnb: error: {exc}", err=True)
        raise typer.Exit(1)
    except BrokenPipeError:  # `textnb classify ... | head` is normal use
        sys.stderr.close()
        raise typer.Exit(0)
    except OSError as exc:  # e.g. the lock file beside a model on a read-only disk
        if exc.errno is None:
            raise
        where = f" '{exc.filename}'" if exc.filename else ""
        typer.echo(f"textnb: error: cannot use{where}: {(exc.strerror or str(exc)).lower()}; "
                   f"{write_fix(exc)}", err=True)
        raise typer.Exit(1)


@contextmanager
def skipping_unreadable(strict: bool):
    """Skip inputs that cannot be read (``textnb.mail.unreadable``), and list them on stderr at
    the end, whether the command then succeeds or fails; with ``strict``, stop at the first.

    YIELDS (Skipped): the inputs skipped so far; falsy when none.
    """
    from ..mail.unreadable import collecting

    with collecting(strict) as skipped:
        try:
            yield skipped
        finally:
            if skipped:
                typer.echo(f"textnb: warning: {skipped.summary()}", err=True)


def nothing_done(skipped, done: int, strict: bool = False) -> None:
    """Say so when no message was read: a run that did nothing must not look fine.

    Exit 1 when every input was skipped, or when the sources held no message (an empty
    folder, an empty index) under ``strict``; without it the latter is a warning.
    """
    if done:
        return
    if skipped:
        typer.echo("textnb: error: no input could be read", err=True)
        raise typer.Exit(1)
    typer.echo(f"textnb: {'error' if strict else 'warning'}: no message was read: the "
               "sources given hold no mail (an empty folder or index?)", err=True)
    if strict:
        raise typer.Exit(1)


def model_path(model: Optional[Path]) -> Path:
    if model is not None:  # the store (NumPy, SciPy) is imported when it is needed
        return model
    from ..modelfile.store import default_model_path

    return default_model_path()


def model_to_read(model: Optional[Path]) -> Path:
    """``model_path`` for a command that needs the model to exist: a missing one named,
    with how to make it, and how to pick another only when --model was not given."""
    path = model_path(model)
    if not path.exists():
        other = ("" if model is not None else
                 ", or pass --model (the default is $TEXTNB_MODEL, else "
                 "~/.local/share/textnb/model.tnb)")
        raise TextnbError(f"no model at '{path}'; train one first with 'textnb train --model "
                          f"{path} --spam SRC --ham SRC'{other}")
    return path


def check_cost_ratio(cost_ratio: Optional[float]) -> None:
    # inf would be "never call anything spam": a threshold no score passes, which is
    # what a typo looks like; a very large finite λ says it on purpose.
    if cost_ratio is not None and not 0 < cost_ratio < float("inf"):
        raise typer.BadParameter(f"{cost_ratio} must be > 0 and finite (e.g. 9: "
                                 "losing a ham costs as much as letting 9 spams through)",
                                 param_hint="--cost-ratio")


def pick_engine(engine: str, scheduler: Optional[str], jobs: Optional[int] = None):
    """The engine the options name (textnb.engines); a usage error for an unknown engine,
    a stray --scheduler, or --jobs with the Dask engine."""
    if engine not in ("local", "dask"):
        raise typer.BadParameter(f"'{engine}' is not an engine; use local or dask",
                                 param_hint="--engine")
    if scheduler is not None and engine != "dask":
        raise typer.BadParameter("--scheduler goes with --engine dask", param_hint="--scheduler")
    if engine == "dask" and jobs is not None:
        raise typer.BadParameter("--jobs goes with --engine local (a Dask cluster has "
                                 "its own workers)", param_hint="--jobs")
    from ..engines import make_engine

    return make_engine(engine, jobs=jobs, scheduler=scheduler)


class Progress:
    """A message counter on stderr, shown only when stderr is a terminal."""

    def __init__(self, verb: str):
        self.verb, self.count = verb, 0
        self.enabled = sys.stderr.isatty()

    def __call__(self, n: int) -> None:
        self.count += n
        if self.enabled:
            sys.stderr.write(f"\r{self.verb} {self.count:,} messages")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.count:
            sys.stderr.write("\n")


def _version_callback(value: bool):
    if value:
        from .._c.speedups import implementation

        # Which per-token loops run: an install without a C compiler runs the Python ones.
        typer.echo(f"textnb {__version__} (per-token loops in {implementation()})")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version_callback,
                                      is_eager=True, help="Show the version and exit.")):
    """textnb: naive Bayes spam filtering with explicit misclassification costs."""

