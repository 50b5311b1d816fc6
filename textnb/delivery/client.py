"""The thin client of the resident scorer, and the protocol both sides speak.

``textnb-client`` is ``textnb filter`` for a running ``textnb serve``: it reads one
message on stdin, asks the scorer for the verdict, and writes the message to stdout
with the verdict headers added (:mod:`textnb.delivery.verdict_headers`). When the scorer is down,
slow or refuses the message, it scores in process instead (loading the model: slow,
but the mail is filtered all the same).

Start-up time is the point of this module. It imports only ``os``, ``sys``,
``_socket`` and :mod:`textnb.delivery.verdict_headers`: no spaCy, NumPy, SciPy or typer, and none of
``socket``, ``re``, ``json`` or ``argparse``: every message pays for every import, and
each of these costs a sizeable share of the bare interpreter's start-up (``socket``
builds enums of its constants; ``_socket``, the C module it wraps, does not). Hence
``_socket`` and options parsed by hand (docs/design/startup.md#the-client).

The protocol, one request per connection (after spamc/spamd, simplified)::

    request:  TEXTNB/1 SCORE <length>[ <cost ratio>][ user=<name>]\\n<length bytes of message>
              TEXTNB/1 LEARN <spam|ham> <length>[ user=<name>]\\n<length bytes of message>
              TEXTNB/1 FORGET <length>[ user=<name>]\\n<length bytes of message>
              TEXTNB/1 PING[ user=<name>]\\n
    reply:    TEXTNB/1 OK <label> <log-odds> <P(spam)> <threshold>\\n
              TEXTNB/1 LEARNED <spam|ham> <new|moved|known>\\n
              TEXTNB/1 FORGOTTEN <spam|ham|not-found>\\n
              TEXTNB/1 PONG <key>=<value> ...\\n
              TEXTNB/1 ERROR <text>\\n

Numbers are written with ``repr``, so the client's headers equal the in-process ones.
``user=`` (``--user``) picks a user's model on a scorer started with ``--models``; a
scorer with one model refuses it. LEARN and FORGET go through the model's ledger as
``textnb retrain`` and ``textnb forget`` do (``new``: learned; ``moved``: it was learned
under the other label; ``known``: already learned so). LEARNED/FORGOTTEN is sent only
once the update is fsync'd to the model's journal and applied: it survives ``kill -9``
and is in the model file within the scorer's ``--flush-seconds`` (textnb.modelfile.journal);
any other reply, or none, means the update may not have been made. Version 1
clients and scorers that know only SCORE and PING still talk to each other unchanged:
a scorer without LEARN answers ERROR, which the client reports as "not learned".
"""

from __future__ import annotations

import _socket
import os
import sys

from .verdict_headers import (
    EXIT_ERROR,
    Verdict,
    describe_error,
    exit_code,
    filter_message,
    in_process_scorer,
)

PROTOCOL = b"TEXTNB/1"
# The longest request or reply line either side accepts.
MAX_LINE = 1024
# The parser keeps the first 10,000,000 bytes of a message (textnb.mail.parse.MailLimits.max_bytes,
# not imported here: it would load the email package) and marks a longer one truncated.
# The client sends one byte more than that, so the scorer sees exactly what an
# in-process filter would; the server accepts this much by default.
MAX_MESSAGE_BYTES = 10_000_001
DEFAULT_TIMEOUT = 10.0  # seconds any one connect, send or receive may wait; then in process


class ScorerUnavailable(Exception):
    """The resident scorer cannot be reached, is too slow, or answered with an error."""


class NoAnswer(ScorerUnavailable):
    """The request was sent and no reply came: the scorer may have acted on it."""


# Why a learn without an answer is "perhaps" not learned (the compiled client says the same).
NO_ANSWER_NOTE = (" (sent, not answered; sending it again is safe: a message learned twice "
                  "counts once)")


# -- addresses -------------------------------------------------------------------


def default_socket() -> str:
    """$TEXTNB_SOCKET, else scorer.sock beside the default model (XDG data dir)."""
    if os.environ.get("TEXTNB_SOCKET"):
        return os.path.expanduser(os.environ["TEXTNB_SOCKET"])
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    return os.path.join(base, "textnb", "scorer.sock")


def parse_address(spec: str) -> str | tuple[str, int]:
    """A Unix socket path, or (host, port) for 'HOST:PORT', ':PORT' or '[::1]:PORT'."""
    host, sep, port = spec.rpartition(":")
    if sep and port.isdigit() and "/" not in spec:
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        return (host or "127.0.0.1", int(port))
    return spec


def show_address(address: str | tuple[str, int]) -> str:
    if isinstance(address, tuple):
        host, port = address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return address


def _connect(address: str | tuple[str, int], timeout: float) -> _socket.socket:
    if isinstance(address, tuple):
        host, port = address
        infos = _socket.getaddrinfo(host, port, 0, _socket.SOCK_STREAM)
        family, kind, proto, _, target = infos[0]
    else:
        owner = os.stat(address).st_uid
        if owner != os.getuid() and not _trusted_folder(address, owner):
            raise ScorerUnavailable(f"socket {address} belongs to uid {owner}, not to this "
                                    "user, in a folder others can write to")
        family, kind, proto, target = _socket.AF_UNIX, _socket.SOCK_STREAM, 0, address
    sock = _socket.socket(family, kind, proto)
    try:
        sock.settimeout(timeout)
        sock.connect(target)
    except BaseException:
        sock.close()
        raise
    return sock


def _trusted_folder(path: str, owner: int) -> bool:
    """Whether only ``owner`` (or root) can have put a socket in ``path``'s folder.

    Anyone can create a socket in a shared folder such as /tmp, and a scorer that
    answers "ham" to everything would be an easy way in; so another user's socket is
    trusted only in a folder owned by root or by that user and writable by no group
    or other (the scorer of ``textnb serve --user-from-peer``, docs/learning.md).
    """
    folder = os.stat(os.path.dirname(path) or ".")
    return folder.st_uid in (0, owner) and not folder.st_mode & 0o022


def _read_reply(sock: _socket.socket) -> bytes:
    chunks, size = [], 0
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk or size > MAX_LINE:
            break
    line = b"".join(chunks).split(b"\n", 1)[0]
    if not line.startswith(PROTOCOL + b" "):
        raise ScorerUnavailable(f"not a textnb scorer reply: {line[:80]!r}")
    return line[len(PROTOCOL) + 1:]


def _exchange(address, request: bytes, timeout: float) -> bytes:
    sent = False
    try:
        sock = _connect(address, timeout)
        try:
            sock.sendall(request)
            sent = True
            return _read_reply(sock)
        finally:
            sock.close()
    except OSError as exc:  # refused, no such socket, timeout, reset, unknown host
        kind = NoAnswer if sent else ScorerUnavailable
        raise kind(f"{show_address(address)}: {exc.strerror or exc}") from None


def score_remote(address, raw: bytes, cost_ratio: float | None = None,
                 timeout: float = DEFAULT_TIMEOUT, user: str | None = None) -> Verdict:
    """The resident scorer's verdict on one message; ScorerUnavailable on any failure."""
    raw = bytes(raw[:MAX_MESSAGE_BYTES])
    ratio = b"" if cost_ratio is None else b" " + repr(float(cost_ratio)).encode("ascii")
    head = (PROTOCOL + b" SCORE " + str(len(raw)).encode("ascii") + ratio + _user_field(user)
            + b"\n")
    reply = _exchange(address, head + raw, timeout)
    kind, _, rest = reply.partition(b" ")
    if kind == b"OK":
        fields = rest.split()
        if len(fields) == 4 and fields[0] in (b"spam", b"ham", b"unsure"):
            try:
                return Verdict(fields[0].decode("ascii"), *(float(f) for f in fields[1:]))
            except ValueError:
                pass
    if kind == b"ERROR":
        raise ScorerUnavailable(f"the scorer at {show_address(address)} said: "
                                + rest.decode("utf-8", "replace"))
    raise ScorerUnavailable(f"malformed scorer reply: {reply[:80]!r}")


def ping(address, timeout: float = DEFAULT_TIMEOUT, user: str | None = None) -> dict[str, str]:
    """The scorer's status (model messages, loads, requests); ScorerUnavailable if down."""
    reply = _exchange(address, PROTOCOL + b" PING" + _user_field(user) + b"\n", timeout)
    kind, _, rest = reply.partition(b" ")
    if kind != b"PONG":
        raise ScorerUnavailable(f"unexpected reply to PING: {reply[:80]!r}")
    pairs = (item.partition("=") for item in rest.decode("utf-8", "replace").split())
    return {key: value for key, _, value in pairs}


def learn_remote(address, raw: bytes, label: str | None, user: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> str:
    """Learn a message as ``label`` ('spam'/'ham'), or forget it (label None), through
    the resident scorer. RETURNS the reply after LEARNED/FORGOTTEN ('spam new', 'ham
    moved', 'spam', 'not-found' ...); ScorerUnavailable when it was not done."""
    raw = bytes(raw[:MAX_MESSAGE_BYTES])
    what = b"LEARN " + label.encode("ascii") + b" " if label else b"FORGET "
    head = PROTOCOL + b" " + what + str(len(raw)).encode("ascii") + _user_field(user) + b"\n"
    reply = _exchange(address, head + raw, timeout)
    kind, _, rest = reply.partition(b" ")
    if kind == (b"LEARNED" if label else b"FORGOTTEN") and rest:
        return rest.decode("ascii", "replace")
    if kind == b"ERROR":
        raise ScorerUnavailable(f"the scorer at {show_address(address)} said: "
                                + rest.decode("utf-8", "replace"))
    raise ScorerUnavailable(f"malformed scorer reply: {reply[:80]!r}")


def _user_field(user: str | None) -> bytes:
    return b"" if user is None else b" user=" + user.encode("utf-8", "replace")


def reply_line(kind: str, *fields) -> bytes:
    """One reply line (used by textnb.delivery.server)."""
    text = " ".join([kind, *(repr(f) if isinstance(f, float) else str(f) for f in fields)])
    return PROTOCOL + b" " + text.replace("\n", " ").encode("utf-8", "replace") + b"\n"


# -- the scorer the filter uses ---------------------------------------------------


def client_scorer(address, model_path=None, cost_ratio: float | None = None,
                  timeout: float = DEFAULT_TIMEOUT, fallback: bool = True, notes=None,
                  user: str | None = None):
    """A scorer that asks the resident scorer and falls back to scoring in process.

    model_path (str | None): the model for the fallback; None: the default model.
    notes (list | None): receives one line when the fallback was used (for stderr).
    RETURNS (Callable[[bytes], Verdict]).
    """
    def score(raw: bytes) -> Verdict:
        try:
            return score_remote(address, raw, cost_ratio, timeout, user)
        except ScorerUnavailable as exc:
            if not fallback:
                raise
            if notes is not None:
                notes.append(f"resident scorer unavailable ({exc}); scoring in process")
            path = model_path
            if path is None:
                from ..modelfile.store import default_model_path

                path = default_model_path()
            return in_process_scorer(path, cost_ratio)(raw)

    return score


def run_filter(stdin, stdout, stderr, score, spamassassin: bool = False,
               always_exit_0: bool = False, notes=None, learn=None) -> int:
    """The whole filter: read one message, write it with headers, return the exit code.

    learn (Callable[[bytes, Verdict], object] | None): called with the message and its
        verdict after the message is written; a failure there is a warning on stderr
        and changes neither the message nor the exit code.
    A failure to read stdin or write stdout exits 3 even with ``always_exit_0``: the
    delivery agent must not take a partial message for the filtered one.
    """
    try:
        raw = stdin.read()
    except OSError as exc:
        stderr.write(f"textnb: error: cannot read the message: {exc}\n")
        return EXIT_ERROR
    result = filter_message(raw, score, spamassassin)
    for note in notes or ():
        stderr.write(f"textnb: warning: {note}\n")
    if result.error is not None:
        stderr.write(f"textnb: error: {result.error}; message passed through unchanged\n")
    try:
        stdout.write(result.output)
        stdout.flush()
    except OSError as exc:
        stderr.write(f"textnb: error: cannot write the message: {exc}\n")
        return EXIT_ERROR
    if learn is not None and result.verdict is not None:
        try:
            learn(raw, result.verdict)
        except Exception as exc:  # noqa: BLE001 - the message is delivered; learning is extra
            stderr.write(f"textnb: warning: not learned: {describe_error(exc)}\n")
    return exit_code(result.verdict, always_exit_0)


# -- command line -----------------------------------------------------------------

USAGE = """\
usage: textnb-client [--server ADDR] [--model PATH] [--cost-ratio R] [--spamassassin]
                     [--always-exit-0] [--no-fallback] [--timeout SECONDS] [--ping]
                     [--user NAME] [--learn spam|ham | --forget]

Filter one message (stdin -> stdout, verdict headers added) through a running
'textnb serve'; score in process when it is down. Exit 0 spam, 1 ham, 2 unsure,
3 error (the message is still written, unchanged).

  --server ADDR      Unix socket path, or HOST:PORT (default: $TEXTNB_SOCKET or
                     ~/.local/share/textnb/scorer.sock)
  --model PATH       model for the in-process fallback (default: $TEXTNB_MODEL or
                     ~/.local/share/textnb/model.tnb)
  --cost-ratio R     cost of losing a ham / cost of letting a spam through
  --spamassassin     also write X-Spam-Flag / X-Spam-Status
  --always-exit-0    exit 0 whatever the verdict (for agents that treat non-zero
                     as failure); a failure to write the message still exits 3
  --no-fallback      never score in process: pass the message through, exit 3
  --timeout SECONDS  give up on the scorer after this long (default 10)
  --ping             print the scorer's status instead of filtering
  --user NAME        the user whose model scores or learns ('textnb serve --models')
  --learn spam|ham   learn the message on stdin as spam or ham instead of filtering;
                     prints what the scorer did; exit 0 once it is durable, 3 if not
  --forget           forget the message on stdin (exit 0 done, 3 not done)
"""

_FLAGS = {"--spamassassin", "--always-exit-0", "--no-fallback", "--ping", "--forget"}
_VALUED = {"--server", "--model", "--cost-ratio", "--timeout", "--user", "--learn"}


def parse_args(argv: list[str]) -> dict[str, object]:
    """Options as a dict; ValueError names a bad one. (By hand: importing argparse would
    add to every message's start-up; docs/design/startup.md#the-client.)"""
    options: dict[str, object] = {}
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if name in _FLAGS and not eq:
            options[name] = True
        elif name in _VALUED:
            if not eq:
                value = next(args, None)
                if value is None:
                    raise ValueError(f"{name} needs a value")
            options[name] = value
        elif arg in ("-h", "--help"):
            options["--help"] = True
        else:
            raise ValueError(f"unknown option {arg!r}")
    for name in ("--cost-ratio", "--timeout"):
        if name in options:
            try:
                number = float(options[name])
            except ValueError:
                number = -1.0
            if not number > 0:
                raise ValueError(f"{name} {options[name]!r} must be a number > 0")
            options[name] = number
    if options.get("--user") is not None:
        check_user_option(options["--user"])
    if options.get("--learn") not in (None, "spam", "ham"):
        raise ValueError(f"--learn {options['--learn']!r} must be spam or ham")
    if "--learn" in options and "--forget" in options:
        raise ValueError("--learn and --forget exclude each other")
    return options


def check_user_option(user: str) -> str:
    """``user`` if it fits on the request line as one word; ValueError naming it if not
    (the scorer checks the name itself: textnb.delivery.users.user_key)."""
    if not 0 < len(user) <= 200 or any(c <= " " or c == "\x7f" for c in user):
        raise ValueError(f"--user {user!r} must be 1-200 characters without spaces or "
                         "control characters")
    return user


def main(argv: list[str] | None = None) -> int:
    """The ``textnb-client`` command. Returns the exit code."""
    try:
        options = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        sys.stderr.write(f"textnb-client: error: {exc}\n{USAGE}")
        # Still a filter: a bad option must not eat the message either.
        return _pass_through() if not sys.stdin.isatty() else EXIT_ERROR
    if options.get("--help"):
        sys.stdout.write(USAGE)
        return 0
    address = parse_address(options.get("--server") or default_socket())
    timeout = options.get("--timeout", DEFAULT_TIMEOUT)
    if options.get("--ping"):
        try:
            status = ping(address, timeout, options.get("--user"))
        except ScorerUnavailable as exc:
            sys.stderr.write(f"textnb-client: {exc}\n")
            return 1
        sys.stdout.write(" ".join(f"{k}={v}" for k, v in status.items()) + "\n")
        return 0
    user = options.get("--user")
    if "--learn" in options or options.get("--forget"):
        return run_learn(sys.stdin.buffer, sys.stdout, sys.stderr, address,
                         options.get("--learn"), user, timeout)
    notes: list[str] = []
    score = client_scorer(address, options.get("--model"), options.get("--cost-ratio"),
                          timeout, fallback=not options.get("--no-fallback"), notes=notes,
                          user=user)
    return run_filter(sys.stdin.buffer, sys.stdout.buffer, sys.stderr, score,
                      spamassassin=bool(options.get("--spamassassin")),
                      always_exit_0=bool(options.get("--always-exit-0")), notes=notes)


def run_learn(stdin, stdout, stderr, address, label: str | None, user: str | None,
              timeout: float) -> int:
    """Learn (or forget, label None) the message on stdin; 0 when the scorer acknowledged
    it (printing its reply), EXIT_ERROR with the reason on stderr when not."""
    what = f"learned as {label}" if label else "forgotten"
    try:
        raw = stdin.read()
        done = learn_remote(address, raw, label, user, timeout)
    except NoAnswer as exc:
        stderr.write(f"textnb-client: error: message perhaps not {what}: {exc}"
                     f"{NO_ANSWER_NOTE}\n")
        return EXIT_ERROR
    except (OSError, ScorerUnavailable) as exc:
        stderr.write(f"textnb-client: error: message not {what}: {exc}\n")
        return EXIT_ERROR
    stdout.write(("learned " if label else "forgotten ") + done + "\n")
    stdout.flush()
    return 0


def _pass_through() -> int:
    try:
        sys.stdout.buffer.write(sys.stdin.buffer.read())
        sys.stdout.buffer.flush()
    except OSError:
        pass
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
