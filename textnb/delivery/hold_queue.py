"""``textnb-release QUEUEID``: release one message from Postfix's hold queue, run as root.

The milter holds spam above ``--quarantine-above`` in Postfix's hold queue, and the
review page offers to release it; only root may (``postsuper -H``), and the page must
not run as root. This command is the narrow path between them, for one sudoers line
(docs/review-page.md#releasing-held-mail):

- it takes exactly one argument, a Postfix queue id in one of Postfix's two formats
  (:func:`valid_queue_id`); anything else is refused before any program runs;
- it releases the message only if it is in the hold queue now (``postqueue -j``): the
  page can make it do nothing else, neither touch mail in the other queues nor pass
  an option to a Postfix command;
- it runs ``postsuper -H`` with that id (an argument list, never a shell), then looks
  again: released means no longer on hold; then ``postqueue -i`` asks for its delivery
  now rather than at the deferred queue's next scan.

It imports only the standard library (``json``, ``re``, ``subprocess``, ``sys``), and
nothing of textnb's beyond this file, so what root runs is this file and the
interpreter. Which Postfix: the one Postfix's own commands find, the system's, or the
instance ``MAIL_CONFIG`` names in the environment (sudo's ``env_reset`` removes it: under
sudo it is always the system's).

The exit status and one line on stdout say what happened (``EXIT_*``): the page
shows the line and acts on the status.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

__all__ = ["EXIT_FAILED", "EXIT_GONE", "EXIT_NOT_HELD", "EXIT_RELEASED", "EXIT_USAGE",
           "USAGE", "held_in", "main", "release", "valid_queue_id"]

EXIT_RELEASED = 0
EXIT_FAILED = 1  # a Postfix command failed, or the message is still on hold
EXIT_USAGE = 2  # not exactly one argument, or not a queue id
EXIT_NOT_HELD = 3  # in the mail queue, not on hold: released already, on its way
EXIT_GONE = 4  # not in the mail queue: delivered, deleted or expired

# Postfix's short queue id (enable_long_queue_ids = no, the default): upper-case hex,
# five digits of the microseconds then the queue file's inode number (at most 16 for a
# 64-bit inode).
SHORT_ID = re.compile(r"[0-9A-F]{5}[0-9A-F]{1,16}")
# The long one (enable_long_queue_ids = yes): Postfix's "safe" alphabet (digits and
# letters without vowels), the seconds (six or more) and microseconds (four) in base
# 52, a 'z', then the inode number in base 51 (the alphabet without 'z', so the last
# 'z' is the separator). Bounded: 2**64 seconds take 12 characters, an inode 12.
_SAFE = "0-9B-DF-HJ-NP-TV-Zb-df-hj-np-tv-z"
_SAFE_NO_Z = "0-9B-DF-HJ-NP-TV-Zb-df-hj-np-tv-y"
LONG_ID = re.compile(f"[{_SAFE}]{{10,16}}z[{_SAFE_NO_Z}]{{1,12}}")
USAGE = """\
usage: textnb-release QUEUEID

Release one message from Postfix's hold queue (postsuper -H), and ask for its delivery
now (postqueue -i), if it is on hold: run as root, through one sudoers line, by the
review page (textnb web --release-command). QUEUEID: one Postfix queue id, short
(upper-case hex) or long (enable_long_queue_ids); nothing else is accepted.

exit status: 0 released, 1 a Postfix command failed, 2 not one queue id,
3 not on hold (released already), 4 not in the mail queue (delivered, deleted, expired)"""
# Seconds each Postfix command may take: four of them, with the interpreter and sudo,
# stay within the page's bound on the whole command (textnb.review.release), so the page
# hears how each one ended.
COMMAND_SECONDS = 10


def valid_queue_id(text) -> bool:
    """Whether ``text`` is a Postfix queue id, short or long: nothing else is ever passed
    to a Postfix command (an id from the verdict log is as untrusted as the mail)."""
    return isinstance(text, str) and text.isascii() and bool(
        SHORT_ID.fullmatch(text) or LONG_ID.fullmatch(text))


def held_in(queue_id: str, run=subprocess.run) -> str | None:
    """The queue ('hold', 'deferred', 'active', ...) the message is in, from ``postqueue
    -j`` (one JSON object per message); None when it is in none. OSError or
    subprocess.SubprocessError when postqueue cannot list the queue."""
    done = run(["postqueue", "-j"], capture_output=True, timeout=COMMAND_SECONDS)
    if done.returncode != 0:
        raise subprocess.SubprocessError(
            "postqueue -j failed: " + done.stderr.decode("utf-8", "replace").strip()[:200])
    for line in done.stdout.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("queue_id") == queue_id:
            return str(entry.get("queue_name", ""))
    return None


def release(queue_id: str, run=subprocess.run) -> tuple[int, str]:
    """Release one held message. RETURNS (an EXIT_* status, what to say)."""
    if not valid_queue_id(queue_id):
        return EXIT_USAGE, "not a Postfix queue id"
    try:
        queue = held_in(queue_id, run)
        if queue is None:
            return EXIT_GONE, (f"{queue_id} is not in the mail queue (delivered, deleted "
                               "or expired)")
        if queue != "hold":
            return EXIT_NOT_HELD, (f"{queue_id} is not on hold (in the {queue} queue: "
                                   "released already)")
        done = run(["postsuper", "-H", queue_id], capture_output=True,
                   timeout=COMMAND_SECONDS)
        if done.returncode != 0:
            return EXIT_FAILED, ("postsuper -H failed: "
                                 + done.stderr.decode("utf-8", "replace").strip()[:200])
        # postsuper reports to syslog, not to a pipe: where the message is now says it
        if held_in(queue_id, run) == "hold":
            return EXIT_FAILED, f"{queue_id} is still on hold after postsuper -H"
    except (OSError, subprocess.SubprocessError) as exc:
        return EXIT_FAILED, f"the mail queue cannot be read or changed: {exc}"
    # Released mail waits in the deferred queue for the queue manager's next scan
    # (queue_run_delay, 300 s by default); asking for its delivery now is what a user
    # who clicked Release expects. Released either way.
    try:
        done = run(["postqueue", "-i", queue_id], capture_output=True,
                   timeout=COMMAND_SECONDS)
        flushed = done.returncode == 0
    except (OSError, subprocess.SubprocessError):
        flushed = False
    return EXIT_RELEASED, f"{queue_id} released from hold" + (
        "" if flushed else "; it is delivered with the queue's next run")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not valid_queue_id(args[0]):
        print(USAGE, file=sys.stderr)
        return EXIT_USAGE
    status, said = release(args[0])
    print(said)
    return status


if __name__ == "__main__":
    sys.exit(main())
