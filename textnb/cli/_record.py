"""The ``--record`` options that ``serve`` and ``milter`` share (textnb.review.recorder;
started by ``textnb.commands.daemons.start_recording``)."""

from __future__ import annotations

import typer

# fmt: off
RecordOpt = typer.Option(None, "--record", help="Record every verdict (sender, subject, score, clues; the message itself for the review queue) in this SQLite file for 'textnb web'. Default: off (docs/review-page.md).")
RecordDaysOpt = typer.Option(30.0, "--record-days", help="With --record: verdicts older than this many days are deleted.")
RecordMaxMbOpt = typer.Option(200, "--record-max-mb", min=1, help="With --record: the file's size cap in MB; past it the oldest messages, then the oldest verdicts, go first.")
RecordUserMbOpt = typer.Option(None, "--record-user-mb", min=1, help="With --record and --models: one user's kept messages in MB at most (their oldest go first). Default: a quarter of --record-max-mb.")
# fmt: on

