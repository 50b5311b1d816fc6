"""The ``--record`` options that ``serve`` and ``milter`` share (textnb.review.recorder)."""

from __future__ import annotations

import typer

# fmt: off
RecordOpt = typer.Option(None, "--record", help="Record every verdict (sender, subject, score, clues; the message itself for the review queue) in this SQLite file for 'textnb web'. Default: off (docs/review-page.md).")
RecordDaysOpt = typer.Option(30.0, "--record-days", help="With --record: verdicts older than this many days are deleted.")
RecordMaxMbOpt = typer.Option(200, "--record-max-mb", min=1, help="With --record: the file's size cap in MB; past it the oldest messages, then the oldest verdicts, go first.")
RecordUserMbOpt = typer.Option(None, "--record-user-mb", min=1, help="With --record and --models: one user's kept messages in MB at most (their oldest go first). Default: a quarter of --record-max-mb.")
# fmt: on


def start_recording(path, days: float, max_mb: int, one_model: bool, who: str = "serve",
                    user_mb: int | None = None):
    """The VerdictRecorder for ``--record PATH``, started; None when off. With one
    model, verdicts are recorded as this OS user's (the page's login of that name), who
    may fill the whole cap; with a model per user, one user's kept messages take at most
    a quarter of it (textnb.review.store.USER_SHARE), or ``user_mb`` MB when given."""
    if path is None:
        return None
    import getpass

    from ..review.recorder import VerdictRecorder

    if not days > 0:
        raise typer.BadParameter(f"{days} must be > 0 days", param_hint="--record-days")
    recorder = VerdictRecorder(path, days, max_mb * 2**20,
                               default_user=getpass.getuser() if one_model else "",
                               max_user_bytes=(user_mb * 2**20 if user_mb is not None
                                               else max_mb * 2**20 if one_model else None)).start()
    typer.echo(f"textnb {who}: recording verdicts in {path} ({days:g} days, at most "
               f"{max_mb} MB)" + (f"; {recorder.problem}" if recorder.problem else ""), err=True)
    return recorder
