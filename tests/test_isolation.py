"""One user's client cannot read or train another user's model (docs/learning.md#isolation).

Real OS users: the scorer runs as root in this process, and the compiled client runs
as the system users ``nobody`` and ``daemon`` (setpriv). What stops a client:

- by default, the socket's mode 0600: another uid cannot connect at all;
- with ``--user-from-peer`` (socket 0666), SO_PEERCRED: the scorer takes the user from
  the connecting uid and refuses a request naming another user;
- the models folder: ``DIR/<user>/`` is created 0700 by the scorer's user, so no
  client reads a model file directly.

Needs root (to switch users) and setpriv; skipped otherwise.
"""

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from textnb.modelfile import store

from test_c_client import c_client  # noqa: F401
from test_per_user import Running, folder, shared_bytes  # noqa: F401
from test_server_learn import variant


def _users_exist() -> bool:
    try:
        pwd.getpwnam("nobody"), pwd.getpwnam("daemon")
    except KeyError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("setpriv") is None or not _users_exist(),
    reason="switching users needs root, setpriv (util-linux) and the users nobody and daemon")


@pytest.fixture
def public():
    """A folder every user can enter but only root can write to (not under tmp_path,
    whose parents are root's own 0700 folders)."""
    path = Path(tempfile.mkdtemp(prefix="textnb-isolation-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def client(public, c_client):  # noqa: F811
    """The compiled client where other users can run it."""
    binary = public / "textnb-client"
    shutil.copy(c_client, binary)
    binary.chmod(0o755)
    return binary


def as_user(name: str, args, stdin: bytes = b""):
    entry = pwd.getpwnam(name)
    return subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                           "--clear-groups", "--", *map(str, args)], input=stdin,
                          capture_output=True, timeout=60, env={"PATH": "/usr/bin:/bin"})


def test_with_user_from_peer_a_client_trains_only_its_own_users_model(public, client,
                                                                      folder, shared_bytes):
    models = public / "models"
    shutil.copytree(folder, models)
    models.chmod(0o700)
    (models / "daemon").mkdir(mode=0o700)
    (models / "daemon" / "model.tnb").write_bytes(shared_bytes)
    before = store.load(models / "daemon" / "model.tnb").n_learned
    run = public / "run"
    run.mkdir(mode=0o755)
    sock = run / "scorer.sock"
    with Running(models, str(sock), user_from_peer=True, socket_mode=0o666):
        own = as_user("nobody", [client, "--server", sock, "--learn", "spam"], variant(1))
        other = as_user("nobody", [client, "--server", sock, "--user", "daemon", "--learn",
                                   "ham"], variant(2))
        ping = as_user("nobody", [client, "--server", sock, "--user", "daemon", "--ping"])
        score = as_user("nobody", [client, "--server", sock, "--user", "daemon",
                                   "--no-fallback"], variant(3))
        read = as_user("nobody", ["cat", models / "daemon" / "model.tnb"])
    assert (own.returncode, own.stdout) == (0, b"learned spam new\n"), own.stderr
    assert other.returncode == 3
    assert b"user 'daemon' refused: this connection is from user 'nobody'" in other.stderr
    assert ping.returncode == 1 and b"refused" in ping.stderr
    assert score.returncode == 3 and score.stdout == variant(3)  # passed through unscored
    assert read.returncode != 0 and b"Permission denied" in read.stderr
    assert store.load(models / "daemon" / "model.tnb").n_learned == before
    assert store.load(models / "nobody" / "model.tnb").n_learned["spam"] == before["spam"] + 1


def test_by_default_another_users_client_cannot_connect(public, client, folder):
    run = public / "run"
    run.mkdir(mode=0o755)
    sock = run / "scorer.sock"
    with Running(folder, str(sock)):
        ping = as_user("nobody", [client, "--server", sock, "--ping"])
        learn = as_user("nobody", [client, "--server", sock, "--user", "daemon", "--learn",
                                   "spam"], variant(4))
    assert ping.returncode == 1 and b"Permission denied" in ping.stderr
    assert learn.returncode == 3 and b"Permission denied" in learn.stderr
    assert not (folder / "daemon").exists()


def test_another_users_socket_in_a_folder_others_can_write_to_is_refused(public, client, folder):
    shared = public / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # sticky, as /tmp: anyone could have put a socket here
    sock = shared / "scorer.sock"
    with Running(folder, str(sock), socket_mode=0o666, user_from_peer=True):
        ping = as_user("nobody", [client, "--server", sock, "--ping"])
    assert ping.returncode == 1
    assert b"belongs to uid 0, not to this user, in a folder others can write to" in ping.stderr
