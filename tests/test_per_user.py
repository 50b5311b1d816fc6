"""A model per user from one scorer (textnb serve --models): verdicts, learning, names, peers.

Servers bind only to a Unix socket in tmp_path, and every wait has a bound.
"""

import os
import pwd
import threading

import pytest
from typer.testing import CliRunner

from textnb.cli import app
from textnb.delivery.client import ScorerUnavailable, learn_remote, ping, score_remote
from textnb.delivery.server import ScorerServer
from textnb.delivery.users import ModelSet, UserNameError, check_user
from textnb.mail.sources import iter_index
from textnb.modelfile import store
from textnb.models.ledger import message_digest

from conftest import SAMPLE_INDEX
from test_server import MESSAGES, Running as _Running
from test_server_learn import variant

SAMPLE = list(iter_index(SAMPLE_INDEX))
SWAP = {"spam": "ham", "ham": "spam"}


class Running(_Running):
    """A scorer over a ModelSet."""

    def __init__(self, folder, address, flush_seconds=0.2, **options):
        options.setdefault("timeout", 5.0)
        options.setdefault("reload_interval", 0.1)
        self.set = ModelSet(folder, flush_seconds=flush_seconds)
        self.server = ScorerServer(self.set, address, **options).bind()
        self.address = self.server.bound_address
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.server.serve_forever, args=(self.stop,))


@pytest.fixture(scope="module")
def shared_bytes(sample_learned_filter):
    """The sample model trained through the ledger (textnb train), so moves can find it."""
    return store.dumps(sample_learned_filter)


@pytest.fixture
def folder(tmp_path, shared_bytes):
    models = tmp_path / "models"
    (models / "_shared").mkdir(parents=True)
    (models / "_shared" / "model.tnb").write_bytes(shared_bytes)
    return models


def test_opposite_labels_give_opposite_verdicts_and_a_new_user_the_shared_one(tmp_path, folder):
    with Running(folder, str(tmp_path / "s.sock")) as running:
        address = running.address
        shared = [score_remote(address, raw).label for raw in MESSAGES]
        for m in SAMPLE:
            assert learn_remote(address, m.raw, m.label, user="alice") == f"{m.label} known"
            assert learn_remote(address, m.raw, SWAP[m.label], user="bob") == \
                f"{SWAP[m.label]} moved"
        alice = [score_remote(address, raw, user="alice").label for raw in MESSAGES]
        bob = [score_remote(address, raw, user="bob").label for raw in MESSAGES]
        carol = [score_remote(address, raw, user="carol").label for raw in MESSAGES]
        assert "spam" in shared and "ham" in shared
        assert alice == shared == carol
        assert bob == [SWAP[label] for label in shared]
        assert ping(address, user="carol")["model"] == "shared"
        assert ping(address, user="bob")["model"] == "user"
    assert not (folder / "carol").exists()  # scoring creates nothing
    assert oct((folder / "bob").stat().st_mode & 0o777) == "0o700"
    bob_file = store.load(folder / "bob" / "model.tnb")
    assert bob_file.ledger.label(message_digest(SAMPLE[0].raw)) == SWAP[SAMPLE[0].label]
    assert store.load(folder / "_shared" / "model.tnb").n_learned == \
        store.load(folder / "alice" / "model.tnb").n_learned  # all known: the shared counts


@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".", "_shared", "", "a" * 65, "-x",
                                  "al ice", "x\x00y", "é"])
def test_a_user_name_that_is_not_plain_is_refused(tmp_path, folder, name):
    with pytest.raises(UserNameError, match="is not allowed"):
        check_user(name)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with Running(folder, str(tmp_path / "s.sock")) as running:
        if " " not in name and "\x00" not in name and name:  # else not one word on the line
            with pytest.raises(ScorerUnavailable, match="is not allowed"):
                learn_remote(running.address, variant(1), "spam", user=name)
            with pytest.raises(ScorerUnavailable, match="is not allowed"):
                score_remote(running.address, variant(1), user=name)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_plain_names_are_accepted():
    for name in ("alice", "bob.smith@example.org", "u+tag", "A1_b-c", "x" * 64):
        assert check_user(name) == name


def test_a_user_learned_before_a_kill_is_restored_from_the_journal(folder):
    first = ModelSet(folder, flush_seconds=3600)  # never written: as if killed
    first.for_learning("dave").update("LEARN", variant(2), "spam")
    assert not (folder / "dave" / "model.tnb").exists()
    again = ModelSet(folder).user_model("dave")  # the next start
    assert again.spam_filter.ledger.label(message_digest(variant(2))) == "spam"
    assert again.spam_filter.n_learned["spam"] == first.shared.spam_filter.n_learned["spam"] + 1


def test_fifty_clients_of_five_users_lose_nothing(tmp_path, folder):
    replies = {}
    with Running(folder, str(tmp_path / "s.sock"), max_clients=8, timeout=20.0) as running:
        def learn(i):
            replies[i] = learn_remote(running.address, variant(200 + i), "spam",
                                      user=f"user{i % 5}", timeout=60.0)

        threads = [threading.Thread(target=learn, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert replies == {i: "spam new" for i in range(50)}
    for u in range(5):
        ledger = store.load(folder / f"user{u}" / "model.tnb").ledger
        assert [ledger.label(message_digest(variant(200 + i))) for i in range(50)] == \
            ["spam" if i % 5 == u else None for i in range(50)]


def test_user_from_peer_takes_the_login_name_and_refuses_another(tmp_path, folder):
    me = pwd.getpwuid(os.getuid()).pw_name
    with Running(folder, str(tmp_path / "s.sock"), user_from_peer=True) as running:
        assert learn_remote(running.address, variant(3), "ham") == "ham new"
        assert learn_remote(running.address, variant(4), "ham", user=me) == "ham new"
        with pytest.raises(ScorerUnavailable, match="refused: this connection is from user"):
            learn_remote(running.address, variant(5), "ham", user="someone-else")
        with pytest.raises(ScorerUnavailable, match="refused"):
            score_remote(running.address, variant(5), user="someone-else")
    ledger = store.load(folder / me / "model.tnb").ledger
    assert ledger.label(message_digest(variant(3))) == ledger.label(message_digest(variant(4))) == "ham"


def test_serve_options_are_checked(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--user-from-peer", "--socket", str(tmp_path / "s")])
    assert result.exit_code == 2 and "--user-from-peer goes with --models" in result.output
    result = runner.invoke(app, ["serve", "--socket-mode", "999", "--socket", str(tmp_path / "s")])
    assert result.exit_code == 2 and "not an octal mode" in result.output


@pytest.mark.parametrize("recipients, mode, user", [
    (["<alice@example.org>"], "local", "alice"),
    (["<Alice+junk@Example.ORG>", "<alice@other.example>"], "local", "alice"),
    (["<alice@example.org>", "<bob@example.org>"], "local", None),  # two users: shared
    (["<Alice@Example.org>"], "address", "alice@example.org"),
    (["<alice@example.org>", "<alice@other.example>"], "address", None),
    (["<../x@example.org>"], "local", None),  # not a user name: shared
    (["<_shared@example.org>"], "local", None),
    (["<postmaster>"], "local", "postmaster"),
    ([], "local", None),
])
def test_the_milter_takes_one_user_from_the_recipients(recipients, mode, user):
    from textnb.delivery.users import user_from_recipients

    assert user_from_recipients(recipients, mode) == user


def test_serve_passes_the_per_user_bounds_to_the_model_set(tmp_path, monkeypatch):
    import textnb.delivery.users

    seen = {}

    class Stop(Exception):
        pass

    def model_set(models, model, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(textnb.delivery.users, "ModelSet", model_set)
    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--models", str(tmp_path), "--socket",
                                 str(tmp_path / "s.sock"), "--max-resident-users", "3",
                                 "--max-users", "7"])
    assert isinstance(result.exception, Stop), result.output
    assert seen["max_resident"] == 3 and seen["max_users"] == 7
    refused = runner.invoke(app, ["serve", "--models", str(tmp_path), "--max-resident-users", "0"])
    assert refused.exit_code == 2 and "--max-resident-users" in refused.output


def test_j12_one_user_name_form_for_the_milter_and_user_and_not_plain_gets_shared(tmp_path,
                                                                                  folder):
    from textnb.delivery.users import user_from_recipients, user_key

    kelvin = "\u212aevin"  # KELVIN SIGN, which str.lower() turns into an ASCII k
    assert user_from_recipients([f"<{kelvin}@example.org>"]) is None  # the shared model
    assert user_from_recipients([f"<{kelvin}@example.org>"], "address") is None
    with pytest.raises(UserNameError, match="is not allowed"):
        user_key(kelvin)
    assert user_from_recipients(["<Alice@example.org>"]) == user_key("Alice") == "alice"
    with Running(folder, str(tmp_path / "s.sock")) as running:
        learn_remote(running.address, variant(7), "spam", user="kevin")
        learn_remote(running.address, variant(8), "spam", user="Alice")  # textnb-client --user
        # the milter's Alice@ and --user alice reach the model --user Alice created
        assert ping(running.address, user=user_from_recipients(["<Alice@x.example>"]))[
            "model"] == "user"
        assert ping(running.address, user="ALICE")["spam"] == ping(running.address,
                                                                 user="alice")["spam"]
        with pytest.raises(ScorerUnavailable, match="is not allowed"):
            score_remote(running.address, variant(7), user=kelvin)
    assert sorted(p.name for p in folder.iterdir()) == ["_shared", "alice", "kevin"]


def test_p14_filter_server_user_asks_for_that_users_model(tmp_path, folder):
    from test_c_client import StandIn

    runner = CliRunner()
    raw = MESSAGES[0]
    with StandIn(tmp_path / "s.sock", b"TEXTNB/1 OK spam 9.5 0.9999 0.0\n") as scorer:
        done = runner.invoke(app, ["filter", "--server", scorer.path, "--user", "alice"],
                             input=raw)
        assert done.exit_code == 0 and b"X-TextNB-Status: spam" in done.stdout_bytes
        ((line, length),) = scorer.requests
    assert line == b"TEXTNB/1 SCORE %d user=alice" % len(raw) and length == len(raw)
    with Running(folder, str(tmp_path / "r.sock")) as running:  # the user's model scores
        learn_remote(running.address, variant(9), "spam", user="alice")
        for raw in MESSAGES[:3]:
            done = runner.invoke(app, ["filter", "--server", running.address, "--user",
                                       "alice", "--timeout", "30"], input=raw)
            label = score_remote(running.address, raw, user="alice").label
            assert done.stdout_bytes.count(f"X-TextNB-Status: {label}\n".encode()) == 1
            assert done.stderr_bytes == b""  # no fallback
    for args, says in ((["--user", "alice"], "give --server too"),
                       (["--server", str(tmp_path / "r.sock"), "--user", "al ice"],
                        "must be 1-200 characters without spaces")):
        done = runner.invoke(app, ["filter", "--model", str(folder / "_shared" / "model.tnb"),
                                   *args], input=raw)
        assert (done.exit_code, done.stdout_bytes) == (3, raw) and says in done.stderr, says
