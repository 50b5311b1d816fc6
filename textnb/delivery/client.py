"""The thin client of the resident scorer, and the protocol both sides speak.

``textnb-client`` is ``textnb filter`` for a running ``textnb serve``: it reads one
message on stdin, asks the scorer for the verdict, and writes the message to stdout
with the verdict headers added (:mod:`textnb.delivery.verdict_headers`). When the scorer is down,
slow or refuses the message, it scores in process instead (loading the model: slow,
but the mail is filtered all the same).

Start-up time is the point of this module. It imports only ``os``, ``sys``, ``time``
(built in, and loaded at start-up already), ``_socket`` and
:mod:`textnb.delivery.verdict_headers` (``hmac`` only with a key): no spaCy, NumPy, SciPy or typer, and none of
``socket``, ``re``, ``json`` or ``argparse``: every message pays for every import, and
each of these costs a sizeable share of the bare interpreter's start-up (``socket``
builds enums of its constants; ``_socket``, the C module it wraps, does not). Hence
``_socket`` and options parsed by hand (docs/design/startup.md#the-client).

The protocol, one request per connection (after spamc/spamd, simplified)::

    request:  TEXTNB/1 SCORE <length>[ <cost ratio>][ user=<name>][ nonce=<hex>]\\n<message>
              TEXTNB/1 LEARN <spam|ham> <length>[ user=<name>][ nonce=<hex>]\\n<message>
              TEXTNB/1 FORGET <length>[ user=<name>][ nonce=<hex>]\\n<message>
              TEXTNB/1 STATE <length>[ user=<name>][ nonce=<hex>]\\n<message>
              TEXTNB/1 PING[ user=<name>][ nonce=<hex>]\\n
    reply:    TEXTNB/1 OK <label> <log-odds> <P(spam)> <threshold>[ mac=<hex>]\\n
              TEXTNB/1 LEARNED <spam|ham> <new|moved|known>[ mac=<hex>]\\n
              TEXTNB/1 FORGOTTEN <spam|ham|not-found>[ mac=<hex>]\\n
              TEXTNB/1 STATE <spam|ham|absent>[ mac=<hex>]\\n
              TEXTNB/1 PONG <key>=<value> ...[ mac=<hex>]\\n
              TEXTNB/1 ERROR <text>[ mac=<hex>]\\n

Numbers are written with ``repr``, so the client's headers equal the in-process ones.
Both clients (this one and clients/textnb-client.c) read a reply by one grammar, and
take nothing else for an answer: the line ends in ``\\n`` within ``MAX_LINE`` bytes; it
holds no control byte; its words are separated by single spaces; an OK has a label and
three numbers as ``repr`` writes a finite float (``-?D+(.D+)?(e[+-]?D+)?``, at most
``MAX_NUMBER`` characters), P(spam) between 0 and 1, and the threshold also ``inf`` or
``-inf`` (a tuned model that flags nothing, or everything, at the λ asked); a LEARNED
or FORGOTTEN outcome is a word of a-z and ``-``; PONG's items are printable ASCII. ``--timeout`` is a deadline
for the whole exchange: connect, send and the whole reply.

With a shared key (``--key-file``, :func:`read_key`; ``textnb serve --key-file``) the
client sends 16 random bytes as ``nonce=`` and the scorer appends ``mac=``, the
HMAC-SHA256 of the nonce, a line end and the reply line (:func:`reply_mac`): a reply
without it, or with a wrong one, is no answer (the client falls back). A TCP scorer
is asked only with a key, or with ``--insecure-tcp``: any local user can bind a TCP
port the scorer is not holding. A Unix socket needs none: the client checks that the
socket's owner (or root) is who listens on it (``SO_PEERCRED``).

``user=`` (``--user``) picks a user's model on a scorer started with ``--models``; a
scorer with one model refuses it. LEARN and FORGET go through the model's ledger as
``textnb retrain`` and ``textnb forget`` do (``new``: learned; ``moved``: it was learned
under the other label; ``known``: already learned so). LEARNED/FORGOTTEN is sent only
once the update is fsync'd to the model's journal and applied: it survives ``kill -9``
and is in the model file within the scorer's ``--flush-seconds`` (textnb.modelfile.journal);
any other reply, or none, means the update may not have been made. Version 1
clients and scorers that know only SCORE and PING still talk to each other unchanged:
a scorer without LEARN answers ERROR, which the client reports as "not learned".
STATE says how the model a lesson for that user goes to has the message now (its
ledger's label, or ``absent``): a LEARN or FORGET sent and not answered
(:class:`NoAnswer`) may have been made, and STATE tells (the review page asks it,
textnb.review.teach).
"""

from __future__ import annotations

import _socket
import os
import sys
import time

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
# Seconds the whole exchange (connect, send, the whole reply) may take; then in process.
DEFAULT_TIMEOUT = 10.0
# The longest number a reply may hold: repr writes a float in at most 24 characters.
MAX_NUMBER = 32
# The nonce a client with a key sends (random bytes, sent as hex), and the key's bounds.
NONCE_BYTES = 16
MIN_KEY_BYTES, MAX_KEY_BYTES = 32, 4096


class ScorerUnavailable(Exception):
    """The resident scorer cannot be reached, is too slow, or answered with an error."""


class KeyFileError(ValueError):
    """The key file (--key-file) cannot be used: missing, open to others, or too short."""


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


def _left(deadline: float) -> float:
    """Seconds left before ``deadline``; TimeoutError once none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    return left


def _connect(address: str | tuple[str, int], deadline: float) -> _socket.socket:
    owner = None
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
        sock.settimeout(_left(deadline))
        sock.connect(target)
        if owner is not None:
            _check_peer(sock, address, owner)
    except BaseException:
        sock.close()
        raise
    return sock


def _check_peer(sock: _socket.socket, address: str, owner: int) -> None:
    """Refuse a listener that is neither the socket file's owner nor root (SO_PEERCRED,
    Linux).

    The file's owner was checked before connecting; between that check and the
    connect, whoever can write to the folder could have renamed a socket of their own
    into place. The kernel's word on who listens closes that gap. Root may listen on a
    socket it handed to the mail user (a scorer started by root, its socket chowned):
    root could answer in that user's name anyway.
    """
    peercred = getattr(_socket, "SO_PEERCRED", None)
    if peercred is None:
        return
    creds = sock.getsockopt(_socket.SOL_SOCKET, peercred, 12)  # pid, uid, gid: 3 ints
    uid = int.from_bytes(creds[4:8], sys.byteorder)
    if uid not in (owner, 0):
        raise ScorerUnavailable(f"socket {address} is owned by uid {owner} but uid {uid} "
                                "listens on it; not asking it")


def _trusted_folder(path: str, owner: int) -> bool:
    """Whether only ``owner`` (or root) can have put a socket in ``path``'s folder.

    Anyone can create a socket in a shared folder such as /tmp, and a scorer that
    answers "ham" to everything would be an easy way in; so another user's socket is
    trusted only in a folder owned by root or by that user and writable by no group
    or other (the scorer of ``textnb serve --user-from-peer``, docs/learning.md).
    """
    folder = os.stat(os.path.dirname(path) or ".")
    return folder.st_uid in (0, owner) and not folder.st_mode & 0o022


# -- the shared key (TCP) -----------------------------------------------------------


def read_key(path) -> bytes:
    """The secret in a key file (surrounding whitespace dropped); KeyFileError naming
    the file and the fix when it is missing, open to group or others, or too short."""
    path = os.path.expanduser(os.fspath(path))
    make = f"make one with 'openssl rand -hex 32 > {path}; chmod 600 {path}'"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise KeyFileError(f"key file {path}: {exc.strerror}; {make}") from None
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o077:
            raise KeyFileError(f"key file {path} has mode {st.st_mode & 0o777:04o}: others "
                               f"could read the key; 'chmod 600 {path}'")
        key = os.read(fd, MAX_KEY_BYTES + 1).strip()
    except OSError as exc:  # a folder, an I/O error
        raise KeyFileError(f"key file {path}: {exc.strerror}; {make}") from None
    finally:
        os.close(fd)
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise KeyFileError(f"key file {path} holds {len(key)} bytes, not {MIN_KEY_BYTES} to "
                           f"{MAX_KEY_BYTES}; {make}")
    return key


def reply_mac(key: bytes, nonce: bytes, line: bytes) -> bytes:
    """HMAC-SHA256 over the client's nonce and the reply line (without ``mac=`` and the
    line end), in hex: what a scorer with the key appends as ``mac=``."""
    import hmac  # only with a key: the Unix socket path pays nothing for it

    return hmac.new(key, nonce + b"\n" + line, "sha256").hexdigest().encode("ascii")


def _authentic(rest: bytes, key: bytes, nonce: bytes, address) -> bytes:
    """The reply after ``TEXTNB/1 `` without its ``mac=`` word, if the MAC proves the
    scorer holds the key; ScorerUnavailable if not. An ERROR needs no proof: it is
    never taken for a verdict."""
    body, sep, mac = rest.rpartition(b" mac=")
    if rest.startswith(b"ERROR"):
        return body if sep else rest
    import hmac

    if not sep or not hmac.compare_digest(mac, reply_mac(key, nonce, PROTOCOL + b" " + body)):
        raise ScorerUnavailable(f"the scorer at {show_address(address)} did not prove it "
                                "holds the key of --key-file (an impostor on its address, or "
                                "a scorer started without that --key-file)")
    return body


# -- one exchange ------------------------------------------------------------------


def _read_line(sock: _socket.socket, deadline: float) -> bytes:
    """What the scorer sends up to its first line end, or all it sent before hanging
    up, or MAX_LINE bytes and one read more: whichever comes first."""
    data = b""
    while b"\n" not in data and len(data) <= MAX_LINE:
        sock.settimeout(_left(deadline))
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def reply_rest(data: bytes) -> bytes:
    """The reply line after ``TEXTNB/1 ``, if it keeps the line rules both clients apply
    (the module docstring); ScorerUnavailable naming the fault if not."""
    line, newline, _ = data.partition(b"\n")
    if not line.startswith(PROTOCOL + b" "):
        raise ScorerUnavailable(f"not a textnb scorer reply: {line[:80]!r}")
    if not newline or len(line) >= MAX_LINE:
        raise ScorerUnavailable(f"malformed scorer reply: no line end within {MAX_LINE} "
                                f"bytes: {line[:80]!r}")
    if any(byte < 0x20 or byte == 0x7F for byte in line):
        raise ScorerUnavailable(f"malformed scorer reply: control bytes in {line[:80]!r}")
    return line[len(PROTOCOL) + 1:]


def _exchange(address, request: bytes, timeout: float, key: bytes | None = None) -> bytes:
    """Send one request, RETURN its reply after ``TEXTNB/1 `` (reply_rest), all within
    ``timeout`` seconds: connect, send and the whole reply share one deadline, so a
    scorer that drips its reply a byte at a time is cut off then too. With ``key``, the
    request carries a fresh nonce and the reply must carry its MAC (_authentic)."""
    deadline = time.monotonic() + timeout
    nonce = None
    if key is not None:
        nonce = os.urandom(NONCE_BYTES).hex().encode("ascii")
        head, _, body = request.partition(b"\n")
        request = head + b" nonce=" + nonce + b"\n" + body
    sent = False
    try:
        sock = _connect(address, deadline)
        try:
            sock.settimeout(_left(deadline))  # sendall: one bound for the whole message
            sock.sendall(request)
            sent = True
            data = _read_line(sock, deadline)
        finally:
            sock.close()
    except OSError as exc:  # refused, no such socket, timeout, reset, unknown host
        kind = NoAnswer if sent else ScorerUnavailable
        raise kind(f"{show_address(address)}: {exc.strerror or exc}") from None
    if not data:  # hung up after the request: it may have been acted on all the same
        raise NoAnswer(f"{show_address(address)}: the connection closed without a reply")
    rest = reply_rest(data)
    return rest if key is None else _authentic(rest, key, nonce, address)


def reply_number(word: bytes) -> float | None:
    """A finite number as ``repr`` writes one (``-12.5``, ``1e-300``), of at most
    MAX_NUMBER characters; None for anything else."""
    if not 0 < len(word) <= MAX_NUMBER:
        return None
    mantissa, e, exponent = (word[1:] if word.startswith(b"-") else word).partition(b"e")
    whole, dot, fraction = mantissa.partition(b".")
    if exponent[:1] in (b"+", b"-"):
        exponent = exponent[1:]
    if not (whole.isdigit() and (fraction.isdigit() or not dot)
            and (exponent.isdigit() or not e)):
        return None
    value = float(word)
    return value if abs(value) < float("inf") else None


def reply_threshold(word: bytes) -> float | None:
    """A reply's threshold: a finite number as :func:`reply_number` reads one, or ``inf`` /
    ``-inf`` as ``repr`` writes them: a tuned model whose map never reaches λ / (1 + λ)
    flags nothing at that λ, and one whose map starts above it flags everything
    (textnb.decision.calibration.log_odds_threshold)."""
    if word in (b"inf", b"-inf"):
        return float(word)
    return reply_number(word)


def _reply_word(word: bytes) -> bool:
    """A learn's outcome word (new, moved, known, spam, not-found): a-z and '-', at most
    32 characters, starting with a letter."""
    return (0 < len(word) <= 32 and 97 <= word[0] <= 122
            and all(97 <= byte <= 122 or byte == 45 for byte in word))


def _refused(address, rest: bytes):
    if rest.startswith(b"ERROR "):
        return ScorerUnavailable(f"the scorer at {show_address(address)} said: "
                                 + rest[6:].decode("utf-8", "replace"))
    return ScorerUnavailable(f"malformed scorer reply: {rest[:80]!r}")


def score_remote(address, raw: bytes, cost_ratio: float | None = None,
                 timeout: float = DEFAULT_TIMEOUT, user: str | None = None,
                 key: bytes | None = None) -> Verdict:
    """The resident scorer's verdict on one message; ScorerUnavailable on any failure.

    key (bytes | None): the shared key (read_key): the reply must prove the scorer
        holds it. None: the reply is taken as it comes (a Unix socket's owner is checked).
    """
    raw = bytes(raw[:MAX_MESSAGE_BYTES])
    ratio = b"" if cost_ratio is None else b" " + repr(float(cost_ratio)).encode("ascii")
    head = (PROTOCOL + b" SCORE " + str(len(raw)).encode("ascii") + ratio + _user_field(user)
            + b"\n")
    rest = _exchange(address, head + raw, timeout, key)
    fields = rest.split(b" ")
    if fields[0] == b"OK" and len(fields) == 5 and fields[1] in (b"spam", b"ham", b"unsure"):
        numbers = [reply_number(fields[2]), reply_number(fields[3]), reply_threshold(fields[4])]
        if None not in numbers and 0.0 <= numbers[1] <= 1.0:
            return Verdict(fields[1].decode("ascii"), *numbers)
    raise _refused(address, rest)


def ping(address, timeout: float = DEFAULT_TIMEOUT, user: str | None = None,
         key: bytes | None = None) -> dict[str, str]:
    """The scorer's status (model messages, loads, requests); ScorerUnavailable if down."""
    rest = _exchange(address, PROTOCOL + b" PING" + _user_field(user) + b"\n", timeout, key)
    items = rest.split(b" ")
    if items[0] != b"PONG" or not all(item and item.isascii() for item in items[1:]):
        raise ScorerUnavailable(f"unexpected reply to PING: {rest[:80]!r}")
    pairs = (item.decode("ascii").partition("=") for item in items[1:])
    return {k: value for k, _, value in pairs}


def learn_remote(address, raw: bytes, label: str | None, user: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, key: bytes | None = None) -> str:
    """Learn a message as ``label`` ('spam'/'ham'), or forget it (label None), through
    the resident scorer. RETURNS the reply after LEARNED/FORGOTTEN ('spam new', 'ham
    moved', 'spam', 'not-found' ...); ScorerUnavailable when it was not done."""
    raw = bytes(raw[:MAX_MESSAGE_BYTES])
    what = b"LEARN " + label.encode("ascii") + b" " if label else b"FORGET "
    head = PROTOCOL + b" " + what + str(len(raw)).encode("ascii") + _user_field(user) + b"\n"
    rest = _exchange(address, head + raw, timeout, key)
    fields = rest.split(b" ")
    if label and fields[0] == b"LEARNED" and len(fields) == 3 and fields[1] in (b"spam", b"ham"):
        done = _reply_word(fields[2])
    else:
        done = not label and fields[0] == b"FORGOTTEN" and len(fields) == 2
        done = done and _reply_word(fields[1])
    if done:
        return b" ".join(fields[1:]).decode("ascii")
    raise _refused(address, rest)


def learned_as(address, raw: bytes, user: str | None = None,
               timeout: float = DEFAULT_TIMEOUT, key: bytes | None = None) -> str:
    """How the model a lesson for ``user`` goes to has the message now: 'spam', 'ham'
    or 'absent' (STATE); ScorerUnavailable when the scorer cannot say."""
    raw = bytes(raw[:MAX_MESSAGE_BYTES])
    head = (PROTOCOL + b" STATE " + str(len(raw)).encode("ascii") + _user_field(user)
            + b"\n")
    rest = _exchange(address, head + raw, timeout, key)
    fields = rest.split(b" ")
    if len(fields) == 2 and fields[0] == b"STATE" and fields[1] in (b"spam", b"ham", b"absent"):
        return fields[1].decode("ascii")
    raise _refused(address, rest)


def _user_field(user: str | None) -> bytes:
    return b"" if user is None else b" user=" + user.encode("utf-8", "replace")


def reply_line(kind: str, *fields) -> bytes:
    """One reply line (used by textnb.delivery.server): control characters, which the
    clients refuse in a reply, become spaces."""
    text = " ".join([kind, *(repr(f) if isinstance(f, float) else str(f) for f in fields)])
    text = "".join(" " if c < " " or c == "\x7f" else c for c in text)
    return PROTOCOL + b" " + text.encode("utf-8", "replace") + b"\n"


# -- the scorer the filter uses ---------------------------------------------------


def unauthenticated_tcp(address, key: bytes | None, insecure_tcp: bool) -> str | None:
    """Why a client must not believe this scorer, or None: a TCP address without a key
    (--key-file) and without --insecure-tcp. Any local user can bind a TCP port the
    scorer is not holding, and answer "ham" to everything."""
    if not isinstance(address, tuple) or key is not None or insecure_tcp:
        return None
    return (f"{show_address(address)} is TCP and no --key-file was given: whoever binds the "
            "port while the scorer is down would be believed; give the scorer's key file "
            "(--key-file or $TEXTNB_KEY_FILE), or pass --insecure-tcp to trust the port")


def client_scorer(address, model_path=None, cost_ratio: float | None = None,
                  timeout: float = DEFAULT_TIMEOUT, fallback: bool = True, notes=None,
                  user: str | None = None, key: bytes | None = None,
                  insecure_tcp: bool = False):
    """A scorer that asks the resident scorer and falls back to scoring in process.

    model_path (str | None): the model for the fallback; None: the default model.
    notes (list | None): receives one line when the fallback was used (for stderr).
    key (bytes | None): the shared key (read_key); a TCP scorer is asked only with one,
        or with ``insecure_tcp`` (unauthenticated_tcp).
    RETURNS (Callable[[bytes], Verdict]).
    """
    refusal = unauthenticated_tcp(address, key, insecure_tcp)

    def score(raw: bytes) -> Verdict:
        try:
            if refusal is not None:
                raise ScorerUnavailable(refusal)
            return score_remote(address, raw, cost_ratio, timeout, user, key)
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
                     [--key-file PATH | --insecure-tcp]

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
  --timeout SECONDS  give up on the scorer after this long, for the whole exchange:
                     connect, send and the whole reply (default 10)
  --ping             print the scorer's status instead of filtering
  --user NAME        the user whose model scores or learns ('textnb serve --models')
  --learn spam|ham   learn the message on stdin as spam or ham instead of filtering;
                     prints what the scorer did; exit 0 once it is durable, 3 if not
  --forget           forget the message on stdin (exit 0 done, 3 not done)
  --key-file PATH    the scorer's shared key ('textnb serve --key-file'; default
                     $TEXTNB_KEY_FILE): each reply must prove the scorer holds it.
                     A TCP scorer is asked only with a key or --insecure-tcp
  --insecure-tcp     believe a TCP scorer without a key (whoever binds its port
                     while it is down is believed too)
"""

_FLAGS = {"--spamassassin", "--always-exit-0", "--no-fallback", "--ping", "--forget",
          "--insecure-tcp"}
_VALUED = {"--server", "--model", "--cost-ratio", "--timeout", "--user", "--learn",
           "--key-file"}


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
    if "--key-file" not in options and os.environ.get("TEXTNB_KEY_FILE"):
        options["--key-file"] = os.environ["TEXTNB_KEY_FILE"]
    if options.get("--key-file"):
        options["--key"] = read_key(options["--key-file"])  # KeyFileError is a ValueError
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
    key, insecure_tcp = options.get("--key"), bool(options.get("--insecure-tcp"))
    if options.get("--ping"):
        try:
            refusal = unauthenticated_tcp(address, key, insecure_tcp)
            if refusal is not None:
                raise ScorerUnavailable(refusal)
            status = ping(address, timeout, options.get("--user"), key)
        except ScorerUnavailable as exc:
            sys.stderr.write(f"textnb-client: {exc}\n")
            return 1
        sys.stdout.write(" ".join(f"{k}={v}" for k, v in status.items()) + "\n")
        return 0
    user = options.get("--user")
    if "--learn" in options or options.get("--forget"):
        return run_learn(sys.stdin.buffer, sys.stdout, sys.stderr, address,
                         options.get("--learn"), user, timeout, key, insecure_tcp)
    notes: list[str] = []
    score = client_scorer(address, options.get("--model"), options.get("--cost-ratio"),
                          timeout, fallback=not options.get("--no-fallback"), notes=notes,
                          user=user, key=key, insecure_tcp=insecure_tcp)
    return run_filter(sys.stdin.buffer, sys.stdout.buffer, sys.stderr, score,
                      spamassassin=bool(options.get("--spamassassin")),
                      always_exit_0=bool(options.get("--always-exit-0")), notes=notes)


def run_learn(stdin, stdout, stderr, address, label: str | None, user: str | None,
              timeout: float, key: bytes | None = None, insecure_tcp: bool = False) -> int:
    """Learn (or forget, label None) the message on stdin; 0 when the scorer acknowledged
    it (printing its reply), EXIT_ERROR with the reason on stderr when not."""
    what = f"learned as {label}" if label else "forgotten"
    try:
        raw = stdin.read()
        refusal = unauthenticated_tcp(address, key, insecure_tcp)
        if refusal is not None:
            raise ScorerUnavailable(refusal)
        done = learn_remote(address, raw, label, user, timeout, key)
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
