"""The Dovecot IMAPSieve recipe in docs/learning.md: its Sieve scripts compile with
Pigeonhole's sievec under the recipe's settings (and not without them); the programs
they pipe to, run as written, teach a user's model through the scorer; and a real
Dovecot with the recipe's configuration, driven over IMAP, does the same when a user
moves mail (when dovecot-imapd is installed and the tests run as root).

Scorers bind only to Unix sockets, Dovecot to a free 127.0.0.1 port; every wait has a bound.
"""

import imaplib
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from textnb.modelfile import store
from textnb.models.ledger import message_digest

from conftest import PROJECT
from helpers import free_port
from test_c_client import c_client  # noqa: F401
from test_per_user import Running, folder, shared_bytes  # noqa: F401
from test_server_learn import variant

DOC = (PROJECT / "docs" / "learning.md").read_text()
SOCKET_IN_DOC = "/run/textnb/scorer.sock"


def sieve_scripts() -> dict[str, str]:
    """{'spam': script, 'ham': script}: the two ```sieve blocks, told apart by their label."""
    blocks = re.findall(r"```sieve\n(.*?)```", DOC, flags=re.S)
    assert len(blocks) == 2
    return {re.search(r'"--learn", "(spam|ham)"', b).group(1): b for b in blocks}


def plugin_settings(pipe_dir) -> str:
    """The recipe's sieve_* plugin settings, with the pipe folder moved to ``pipe_dir``."""
    (config,) = re.findall(r"```text\n(# /etc/dovecot.*?)```", DOC, flags=re.S)
    wanted = [line.strip() for line in config.splitlines()
              if re.match(r"\s*sieve_(plugins|global_extensions)\s*=", line)]
    assert len(wanted) == 2
    return "plugin {\n  " + "\n  ".join(wanted) + f"\n  sieve_pipe_bin_dir = {pipe_dir}\n}}\n"


def pipe_arguments(script: str, user: str, sock) -> list[str]:
    """The program and arguments of the script's ``pipe`` command, variables filled in."""
    program, arguments = re.search(r'pipe :copy "([^"]+)" \[(.*?)\];', script, flags=re.S).groups()
    values = re.findall(r'"([^"]*)"', arguments)
    return [program] + [v.replace("${user}", user).replace(SOCKET_IN_DOC, str(sock))
                        for v in values]


def test_the_sieve_scripts_compile_with_the_recipes_settings(tmp_path):
    if shutil.which("sievec") is None:
        pytest.skip("sievec is not installed (apt-get install dovecot-sieve); it checks the "
                    "IMAPSieve recipe in docs/learning.md")
    config = tmp_path / "dovecot.conf"
    for label, script in sieve_scripts().items():
        path = tmp_path / f"textnb-learn-{label}.sieve"
        path.write_text(script)
        config.write_text(plugin_settings(tmp_path))
        done = subprocess.run(["sievec", "-c", str(config), str(path), str(tmp_path / "a.svbin")],
                              capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        config.write_text("")
        done = subprocess.run(["sievec", "-c", str(config), str(path), str(tmp_path / "b.svbin")],
                              capture_output=True, timeout=60)
        assert done.returncode != 0 and b"vnd.dovecot.pipe" in done.stderr


def test_the_ham_script_skips_trash_and_both_take_the_imap_user():
    scripts = sieve_scripts()
    assert re.search(r'if string "\$\{mailbox\}" "Trash" \{\s*stop;', scripts["ham"])
    for script in scripts.values():
        assert 'environment :matches "imap.user" "*"' in script
    assert "imapsieve_mailbox1_name = Junk" in DOC and "imapsieve_mailbox2_from = Junk" in DOC


def test_moving_into_and_out_of_junk_teaches_the_users_model(tmp_path, folder, c_client):  # noqa: F811
    """The pipe commands as the scripts give them, with the compiled client linked in
    as the recipe links it."""
    pipe_dir = tmp_path / "sieve-pipe"
    pipe_dir.mkdir()
    (pipe_dir / "textnb-client").symlink_to(c_client)
    sock = tmp_path / "scorer.sock"
    message = variant(7)
    replies = []
    with Running(folder, str(sock)):
        for label in ("spam", "ham"):  # into Junk, then out of it to the inbox
            program, *args = pipe_arguments(sieve_scripts()[label], "alice", sock)
            done = subprocess.run([str(pipe_dir / program), *args], input=message,
                                  capture_output=True, timeout=60)
            assert done.returncode == 0, done.stderr
            replies.append(done.stdout.decode().strip())
    assert replies == ["learned spam new", "learned ham moved"]
    alice = store.load(folder / "alice" / "model.tnb")
    assert alice.ledger.label(message_digest(message)) == "ham"
    assert store.load(folder / "_shared" / "model.tnb").ledger.label(
        message_digest(message)) is None


# -- a real Dovecot ----------------------------------------------------------------------

DOVECOT_IMAP = Path("/usr/lib/dovecot/imap")
IMAPSIEVE = Path("/usr/lib/dovecot/modules/lib95_imap_sieve_plugin.so")


def recipe_config(pipe_dir: Path, sieve_dir: Path) -> str:
    """docs/learning.md's Dovecot configuration block, its paths moved into the test's."""
    (config,) = re.findall(r"```text\n(# /etc/dovecot.*?)```", DOC, flags=re.S)
    lines = [line for line in config.splitlines() if not line.lstrip().startswith("#")]
    return ("\n".join(lines).replace("/usr/lib/dovecot/sieve-pipe", str(pipe_dir))
            .replace("/etc/dovecot/sieve", str(sieve_dir)) + "\n")


def dovecot_base_config(root: Path, port: int) -> str:
    """A private Dovecot: IMAP on 127.0.0.1:port, any user with password 'secret', mail
    in root/mail as nobody, Junk and Trash created."""
    return f"""\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
mail_location = maildir:{root}/mail/%u
first_valid_uid = 1
default_login_user = nobody
default_internal_user = nobody
passdb {{
  driver = static
  args = password=secret
}}
userdb {{
  driver = static
  args = uid=nobody gid={pwd.getpwnam("nobody").pw_gid} home={root}/mail/%u
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
namespace inbox {{
  inbox = yes
  mailbox Junk {{
    auto = create
    special_use = \\Junk
  }}
  mailbox Trash {{
    auto = create
    special_use = \\Trash
  }}
}}
"""


@pytest.mark.slow
@pytest.mark.skipif(not (DOVECOT_IMAP.exists() and IMAPSIEVE.exists() and shutil.which("dovecot")
                         and shutil.which("sievec")),
                    reason="needs Dovecot's IMAP server and Pigeonhole: apt-get install "
                           "dovecot-imapd dovecot-sieve")
@pytest.mark.skipif(os.getuid() != 0, reason="Dovecot's master must start as root")
def test_a_real_dovecot_learns_when_a_user_moves_mail(folder, c_client):  # noqa: F811
    """Dovecot runs the pipe as the mail user (nobody here); the scorer runs as root in
    this process, so its 0600 socket is handed to nobody: the deployment docs/learning.md
    gives, a scorer run as the mail user with its socket 0600, in which only that user
    may connect (a 0666 socket would let every local user teach every model, and the
    scorer refuses it without --user-from-peer: docs/security.md)."""
    root = Path(tempfile.mkdtemp(prefix="textnb-dovecot-"))
    try:
        root.chmod(0o755)
        pipe_dir, sieve_dir, run = root / "pipe", root / "sieve", root / "scorer"
        for path in (pipe_dir, sieve_dir, run, root / "mail", root / "state"):
            path.mkdir(mode=0o755)
        shutil.chown(root / "mail", "nobody")
        shutil.copy(c_client, pipe_dir / "textnb-client")
        (pipe_dir / "textnb-client").chmod(0o755)
        sock = run / "scorer.sock"
        for label, script in sieve_scripts().items():
            path = sieve_dir / f"textnb-learn-{label}.sieve"
            path.write_text(script.replace(SOCKET_IN_DOC, str(sock)))
        port = free_port()
        config = root / "dovecot.conf"
        config.write_text(dovecot_base_config(root, port) + recipe_config(pipe_dir, sieve_dir))
        for path in sieve_dir.glob("*.sieve"):  # as the recipe says: compiled by the admin
            subprocess.run(["sievec", "-c", str(config), str(path)], check=True, timeout=60)
        for path in sieve_dir.iterdir():
            path.chmod(0o644)
        spam = variant(11)
        with Running(folder, str(sock), socket_mode=0o600) as running:
            shutil.chown(sock, "nobody")
            subprocess.run(["dovecot", "-c", str(config)], check=True, timeout=60)
            try:
                counts = _moves(port, spam, lambda: running.set.user_model("alice"))
            finally:
                subprocess.run(["doveadm", "-c", str(config), "stop"], timeout=60)
        log = (root / "dovecot.log").read_text(errors="replace")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    shared = store.load(folder / "_shared" / "model.tnb").n_learned
    plus = [(n["spam"] - shared["spam"], n["ham"] - shared["ham"]) for n in counts]
    assert plus == [(1, 0),  # INBOX -> Junk: spam
                    (0, 1),  # Junk -> INBOX: moved to ham
                    (1, 1),  # APPEND into Junk: spam
                    (1, 1)], log  # Junk -> Trash: nothing learned


def _moves(port: int, message: bytes, alice_model) -> list[dict]:
    """A user's IMAP session: each move, then Alice's learned counts after it."""
    crlf = message.replace(b"\n", b"\r\n")
    other = variant(12).replace(b"\n", b"\r\n")
    counts = []

    def learned():
        model = alice_model()
        return dict(model.spam_filter.n_learned) if model is not None else {}

    deadline = time.monotonic() + 60
    while True:
        try:
            imap = imaplib.IMAP4("127.0.0.1", port)
            break
        except OSError:
            assert time.monotonic() < deadline, "Dovecot did not listen"
            time.sleep(0.2)
    try:
        imap.login("alice", "secret")
        imap.append("INBOX", None, None, crlf)
        imap.select("INBOX")
        assert imap._simple_command("MOVE", "1", "Junk")[0] == "OK"
        counts.append(learned())
        imap.select("Junk")
        assert imap._simple_command("MOVE", "1", "INBOX")[0] == "OK"
        counts.append(learned())
        imap.append("Junk", None, None, other)
        counts.append(learned())
        imap.select("Junk")
        assert imap._simple_command("MOVE", "1:*", "Trash")[0] == "OK"
        counts.append(learned())
    finally:
        imap.logout()
    return counts
