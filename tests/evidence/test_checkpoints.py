"""Signed checkpoints against an attacker with full database rights (SPEC §10).

Each attack is played with plain SQL (tests/attacker.py): triggers dropped or disabled,
hashes recomputed with the store's own ``event_hash``, projection rows fixed up. Where
the database's own checks are fooled, the test shows it (``verify()`` passes), then
shows that a checkpoint taken before the attack is not.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from attacker import (
    EVENTS,
    delete_checkpoint_tables,
    delete_tail,
    delete_thread,
    disable_triggers,
    insert_event,
    reforge,
    reforge_answer,
    swap_positions,
)
from cli_helpers import assert_clean_error, run_cli

from symfonic_store import (
    AsyncInterruptStore,
    EvidenceError,
    InterruptStore,
    InvalidInputError,
    StoredEvent,
    build_interrupt_marker,
)
from symfonic_store.services.evidence import (
    Checkpoint,
    generate_key,
    key_id,
    load_private_key,
    load_public_key,
    parse_checkpoint,
)

IID = "i-refund000001"


def refund(store: InterruptStore, thread_id: str, *, actor: str = "alice", approved: bool = True) -> None:
    """A refund decided by ``actor``: five events, the answer at version 4."""
    store.record_route(thread_id, "continue", run_id="r1")
    store.mint(thread_id, build_interrupt_marker(
        name="approval_required", interrupt_id=IID, payload={"amount": 420}, run_id="r1"))
    store.record_route(thread_id, "interrupt", run_id="r1")
    store.resume(thread_id, IID, {"approved": approved}, actor=actor)
    store.record_route(thread_id, "continue", run_id="r1")


@pytest.fixture
def key(tmp_path: Path) -> Path:
    private, _ = generate_key(tmp_path / "signing")
    return private


@pytest.fixture
def pub(key: Path) -> Path:
    return key.with_name(key.name + ".pub")


@pytest.fixture
def signed(store: InterruptStore, key: Path) -> tuple[InterruptStore, Checkpoint]:
    """Three threads (bob rejected ``t-bob``) and a checkpoint of them."""
    refund(store, "t-alice")
    refund(store, "t-bob", actor="bob", approved=False)
    refund(store, "t-other")
    return store, store.checkpoint(key)


def check(store: InterruptStore, checkpoint: Checkpoint, pub: Path, **kw: object):  # type: ignore[no-untyped-def]
    return store.verify_checkpoint(checkpoint, public_keys=[pub], **kw)


# --- what a checkpoint is -----------------------------------------------------------------


def test_a_checkpoint_commits_to_the_log_and_later_appends_are_not_flagged(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path
) -> None:
    """A fresh checkpoint verifies; events appended afterwards (new threads, old threads) leave it verifying, and the next checkpoint lists only what changed."""
    store, first = signed
    doc = first.document
    assert doc["position"] == store.events()[-1].position == 15
    assert doc["previous"] is None and doc["threads"] == 3
    assert doc["key_id"] == key_id(load_public_key(pub))
    assert {h[0] for h in doc["heads"]} == {"t-alice", "t-bob", "t-other"}
    assert check(store, first, pub).ok

    store.record_route("t-alice", "finish", run_id="r2")
    refund(store, "t-new")
    assert check(store, first, pub).ok
    second = store.checkpoint(key)
    assert second.document["previous"] == {"position": 15, "root": first.root, "id": first.id}
    assert sorted(h[0] for h in second.document["heads"]) == ["t-alice", "t-new"]
    assert second.document["threads"] == 4
    assert check(store, second, pub).ok and check(store, first, pub).ok


def test_a_careless_edit_is_named_by_verify_and_by_the_checkpoint(
    signed: tuple[InterruptStore, Checkpoint], pub: Path
) -> None:
    """An event's data changed without recomputing its hash: both checks name the thread and the event's position."""
    store, cp = signed
    target = store.history("t-bob")[3]
    disable_triggers(store)
    with store.engine.begin() as conn:
        conn.execute(sa.update(EVENTS).where(EVENTS.c.position == target.position)
                     .values(data={"response": {"approved": True}}))
    assert [(b.thread_id, b.position) for b in store.verify().broken] == [("t-bob", target.position)]
    report = check(store, cp, pub)
    assert (report.first.thread_id, report.first.position) == ("t-bob", target.position)  # type: ignore[union-attr]


def test_bob_s_rejection_re_forged_as_alice_s_approval_is_caught_only_by_the_checkpoint(
    store: InterruptStore, key: Path, pub: Path
) -> None:
    """The issue's attack: every hash recomputed and the head fixed, verify() passes; the checkpoints name t-bob, down to the forged event when one was taken before it."""
    refund(store, "t-alice")
    store.record_route("t-bob", "continue", run_id="r1")
    store.mint("t-bob", build_interrupt_marker(
        name="approval_required", interrupt_id=IID, payload={"amount": 420}, run_id="r1"))
    store.record_route("t-bob", "interrupt", run_id="r1")
    asked = store.checkpoint(key)  # t-bob waits for an answer
    store.resume("t-bob", IID, {"approved": False}, actor="bob")
    store.record_route("t-bob", "continue", run_id="r1")
    answered = store.checkpoint(key)
    first, answer = store.history("t-bob")[0], store.history("t-bob")[3]

    reforge(store, "t-bob", lambda e: {"actor": "alice", "data": {"response": {"approved": True}}}
            if e.version == 4 else None)
    assert [(r.actor, r.response) for r in store.audit(thread_id="t-bob")] == [("alice", {"approved": True})]
    assert store.verify().broken == []  # the chain and the head both hold: fooled

    report = check(store, answered, pub)
    assert [p.thread_id for p in report.problems] == ["t-bob"]
    # The earlier checkpoint still matches up to version 3: the forgery is at or after the answer.
    assert report.first.position == answer.position  # type: ignore[union-attr]
    assert "'t-bob'" in str(report) and f"position {answer.position}" in str(report)
    assert check(store, asked, pub).ok  # it committed to nothing that changed

    alone = check(store, answered, pub, thread_id="t-bob")
    # Alone, a checkpoint knows the thread's last head only: all it can name is the thread.
    assert [(p.thread_id, p.position) for p in alone.problems] == [("t-bob", first.position)]


def test_a_deleted_tail_with_the_projection_rolled_back_is_caught_by_the_checkpoint(
    signed: tuple[InterruptStore, Checkpoint], pub: Path
) -> None:
    """Alice's approval and what follows deleted, the projection rebuilt to match: verify() passes, the approval is pending again, and the checkpoint names t-alice."""
    store, cp = signed
    delete_tail(store, "t-alice", 4)
    assert store.pending("t-alice") is not None  # approvable a second time
    assert store.verify().broken == []
    report = check(store, cp, pub)
    assert [p.thread_id for p in report.problems] == ["t-alice"]
    assert "removed" in report.problems[0].problem


def test_a_whole_thread_removed_is_named_by_the_checkpoint(
    signed: tuple[InterruptStore, Checkpoint], pub: Path
) -> None:
    """Every event of t-other and its projection row deleted: verify() has nothing to compare, the checkpoint names the thread."""
    store, cp = signed
    delete_thread(store, "t-other")
    assert store.verify().broken == []
    report = check(store, cp, pub)
    assert [p.thread_id for p in report.problems] == ["t-other"]
    assert "whole thread was removed" in report.problems[0].problem


def test_an_event_inserted_below_the_position_is_named(
    signed: tuple[InterruptStore, Checkpoint], pub: Path
) -> None:
    """A forged thread whose event sits at a position the checkpoint covers is an insertion, named with its position."""
    store, cp = signed
    forged = StoredEvent(
        position=0, thread_id="t-forged", version=1, type="route.decided", interrupt_id=None,
        run_id="r1", actor=None, data={"route": "finish", "interrupt_id": None, "reason": None},
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC), hash="",
    )
    insert_event(store, forged)
    assert store.verify().broken == []
    report = check(store, cp, pub)
    assert [(p.thread_id, p.position) for p in report.problems] == [("t-forged", 0)]
    assert "inserted" in report.problems[0].problem


def test_positions_swapped_across_threads_are_named(
    signed: tuple[InterruptStore, Checkpoint], pub: Path
) -> None:
    """Two threads' events exchange their global positions (hashes do not cover them): verify() passes, the checkpoint names the first thread moved."""
    store, cp = signed
    last_alice = store.history("t-alice")[-1].position
    first_bob = store.history("t-bob")[0].position
    assert first_bob == last_alice + 1
    swap_positions(store, last_alice, first_bob)
    assert store.verify().broken == []
    report = check(store, cp, pub)
    assert {p.thread_id for p in report.problems} == {"t-alice", "t-bob"}
    # t-alice's last event moved: the checkpoint committed its position, so it is named.
    assert (report.first.thread_id, report.first.position) == ("t-alice", last_alice)  # type: ignore[union-attr]


# --- the checkpoint file itself ------------------------------------------------------------


def test_an_edited_checkpoint_or_one_signed_by_another_key_fails(
    signed: tuple[InterruptStore, Checkpoint], pub: Path, tmp_path: Path
) -> None:
    """A field changed by hand breaks the signature; a checkpoint re-signed with the attacker's key is refused by the owner's public key."""
    store, cp = signed
    edited = dict(cp.document, position=cp.position - 1, cursor=cp.position - 1)
    report = check(store, parse_checkpoint(edited), pub)
    assert not report.ok and "edited" in str(report)

    other, other_pub = generate_key(tmp_path / "attacker")
    forged_key = load_private_key(other)
    forged = dict(cp.document, key_id=key_id(forged_key.public_key()))
    from symfonic_store.services.evidence import sign

    forged["signature"] = sign(Checkpoint(forged).unsigned(), forged_key)
    report = check(store, parse_checkpoint(forged), pub)
    assert not report.ok and "not among the given public keys" in str(report)
    assert check(store, parse_checkpoint(forged), other_pub).ok  # it is a valid signature, of another key

    assert cp.document["cursor"] == cp.position and cp.document["in_flight"] == []
    with pytest.raises(EvidenceError, match="unknown fields"):
        parse_checkpoint(dict(cp.document, frontier=12))  # a newer format is refused, not ignored
    with pytest.raises(EvidenceError, match="in_flight"):
        parse_checkpoint(dict(cp.document, in_flight=[7]))
    with pytest.raises(EvidenceError, match="missing"):
        parse_checkpoint({k: v for k, v in cp.document.items() if k != "in_flight"})
    older = {k: v for k, v in cp.document.items() if k not in ("cursor", "in_flight")}
    assert parse_checkpoint(older).position == cp.position  # a file from before both fields
    with pytest.raises(EvidenceError, match="heads_sha256"):
        parse_checkpoint(dict(cp.document, heads=cp.document["heads"][1:]))  # a head dropped
    with pytest.raises(EvidenceError):
        parse_checkpoint("{not json")


# --- taking one ----------------------------------------------------------------------------


def test_taking_a_checkpoint_refuses_a_log_that_no_longer_extends_the_last_one(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path
) -> None:
    """After a re-forge, the next checkpoint refuses to sign (naming the thread); --full starts a new chain, which the old checkpoint still contradicts."""
    store, cp = signed
    reforge(store, "t-bob", lambda e: {"actor": "alice"} if e.version == 4 else None)
    store.record_route("t-bob", "finish", run_id="r1")  # the next append chains on the forgery
    with pytest.raises(EvidenceError) as refused:
        store.checkpoint(key)
    assert refused.value.thread_id == "t-bob"
    assert len(store.events()) == 16

    restart = store.checkpoint(key, full=True)
    assert restart.document["full"] is True and restart.document["previous"]["id"] == cp.id
    assert check(store, restart, pub).ok
    assert [p.thread_id for p in check(store, cp, pub).problems] == ["t-bob"]


def test_the_kept_checkpoint_state_altered_is_refused(
    signed: tuple[InterruptStore, Checkpoint], key: Path
) -> None:
    """Editing the kept heads (to match a forged log) or the bucket hashes makes the next checkpoint refuse."""
    store, _ = signed
    store.record_route("t-alice", "finish", run_id="r2")
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE symfonic_checkpoint_heads SET version = version + 1 WHERE thread_id = 't-alice'")
    with pytest.raises(EvidenceError, match="altered"):
        store.checkpoint(key)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE symfonic_checkpoint_heads SET version = version - 1 WHERE thread_id = 't-alice'")
        conn.exec_driver_sql("UPDATE symfonic_checkpoint_buckets SET threads = threads + 1")
    with pytest.raises(EvidenceError, match="altered"):
        store.checkpoint(key)


def test_a_stolen_key_cannot_rewrite_what_the_kept_files_committed_to(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path, tmp_path: Path
) -> None:
    """The attacker re-forges the log and signs a fresh checkpoint with the stolen key: the file kept outside still fails, and the owner's next checkpoint with --previous or --chain refuses."""
    store, kept = signed
    reforge(store, "t-bob", lambda e: {"actor": "alice"} if e.version == 4 else None)
    theirs = store.checkpoint(key, full=True)
    assert check(store, theirs, pub).ok  # valid: the key signs anything
    assert [p.thread_id for p in check(store, kept, pub).problems] == ["t-bob"]
    with pytest.raises(EvidenceError, match="not the previous checkpoint given"):
        store.checkpoint(key, previous=kept)
    # Kept in a chain folder, the file is proven against the log: the thread is named.
    folder = tmp_path / "chain"
    folder.mkdir()
    (folder / "checkpoint-kept.json").write_text(kept.to_json())
    with pytest.raises(EvidenceError) as chained:
        store.checkpoint(key, chain=folder)
    assert chained.value.thread_id == "t-bob"


def test_keys_rotate_and_each_checkpoint_verifies_with_its_own(
    signed: tuple[InterruptStore, Checkpoint], pub: Path, tmp_path: Path
) -> None:
    """A checkpoint signed by a new key chains on the old key's; with both public keys both verify and a forgery is still named."""
    store, old = signed
    new_key, new_pub = generate_key(tmp_path / "rotated")
    store.record_route("t-alice", "finish", run_id="r2")
    new = store.checkpoint(new_key)
    assert new.key_id != old.key_id and new.document["previous"]["id"] == old.id
    both = [pub, new_pub]
    assert store.verify_checkpoint(new, public_keys=both).ok
    assert not store.verify_checkpoint(new, public_keys=[pub]).ok
    reforge(store, "t-other", lambda e: {"actor": "mallory"} if e.version == 4 else None)
    report = store.verify_checkpoint(new, public_keys=both)
    assert [p.thread_id for p in report.problems] == ["t-other"]


def test_the_thread_is_named_from_the_files_when_the_database_lost_the_chain(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path
) -> None:
    """With the recorded checkpoints deleted, the latest file alone still detects the change (unnamed); given the earlier file too, it names the thread."""
    store, first = signed
    store.record_route("t-other", "finish", run_id="r2")
    second = store.checkpoint(key)
    reforge(store, "t-alice", lambda e: {"actor": "mallory"} if e.version == 4 else None)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM symfonic_checkpoints")
    alone = check(store, second, pub)
    assert not alone.ok and alone.first.thread_id is None  # type: ignore[union-attr]
    assert "cannot be named" in str(alone)
    named = check(store, second, pub, chain=[first])
    assert [p.thread_id for p in named.problems] == ["t-alice"]


def test_verify_one_thread_against_a_checkpoint(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path
) -> None:
    """thread_id checks that thread's events only: another thread's forgery is not reported, its own is."""
    store, cp = signed
    store.record_route("t-alice", "finish", run_id="r2")
    latest = store.checkpoint(key)
    reforge(store, "t-bob", lambda e: {"actor": "alice"} if e.version == 4 else None)
    for c in (cp, latest):
        only_alice = check(store, c, pub, thread_id="t-alice")
        assert only_alice.ok and only_alice.threads_checked == 1
        assert only_alice.events_checked == (5 if c is cp else 6)
        assert [p.thread_id for p in check(store, c, pub, thread_id="t-bob").problems] == ["t-bob"]
    assert check(store, cp, pub, thread_id="t-nobody").ok  # nothing committed, nothing there


def test_concurrent_checkpoints_and_writers_never_fork_the_chain(
    store: InterruptStore, key: Path, pub: Path
) -> None:
    """Checkpoints taken from two connections while two others append: each follows exactly one other, and every one of them verifies."""
    _race_checkpoints_and_writers(store, key, pub)


@pytest.mark.postgres
def test_checkpoints_race_writers_alike_on_the_core_path(
    postgres_schema_url: str, key: Path, pub: Path
) -> None:
    """The same race with every statement through SQLAlchemy Core (the path taken when statement events are listened to): the engines' own BEGIN keeps checkpoints out of the writers too."""
    engine = sa.create_engine(postgres_schema_url, execution_options={"symfonic_fast_path": False})
    with InterruptStore(engine) as core:
        core.setup()
        _race_checkpoints_and_writers(core, key, pub)


def _race_checkpoints_and_writers(store: InterruptStore, key: Path, pub: Path) -> None:
    refund(store, "t-0")
    start = threading.Barrier(4)
    taken: list[Checkpoint] = []
    failures: list[BaseException] = []

    def take() -> None:
        try:
            start.wait()
            for _ in range(5):
                taken.append(store.checkpoint(key))
        except BaseException as exc:
            failures.append(exc)

    def write(thread_id: str) -> None:
        try:
            start.wait()
            for _ in range(20):
                store.record_route(thread_id, "continue", run_id="r1")
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=take), threading.Thread(target=take),
               threading.Thread(target=write, args=("w-1",)), threading.Thread(target=write, args=("w-2",))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures, failures
    previous = [c.document["previous"]["id"] for c in taken if c.document["previous"]]
    assert len(previous) == len(set(previous)) == 9  # a single chain of ten
    for c in taken:
        assert check(store, c, pub).ok, str(check(store, c, pub))


async def test_the_async_store_takes_and_verifies_checkpoints_alike(
    astore: AsyncInterruptStore, migrated_url: str, key: Path, pub: Path
) -> None:
    """AsyncInterruptStore.checkpoint and verify_checkpoint run the same plans."""
    sync = InterruptStore(migrated_url)
    try:
        refund(sync, "t-a")
    finally:
        sync.close()
    cp = await astore.checkpoint(key)
    assert (await astore.verify_checkpoint(cp, public_keys=[pub])).ok
    sync = InterruptStore(migrated_url)
    try:
        reforge(sync, "t-a", lambda e: {"actor": "mallory"} if e.version == 4 else None)
    finally:
        sync.close()
    report = await astore.verify_checkpoint(cp, public_keys=[pub])
    assert [p.thread_id for p in report.problems] == ["t-a"]


# --- the command line ---------------------------------------------------------------------


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(tmp_path: Path) -> None:
    """keygen writes KEY (mode 0600) and KEY.pub as PEM; a second run on the same name exits 2 and leaves them."""
    out = tmp_path / "ops-key"
    done = run_cli("keygen", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert out.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert (tmp_path / "ops-key.pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")
    before = out.read_bytes()
    again = run_cli("keygen", "--out", str(out))
    assert "never overwrites" in assert_clean_error(again, 2)
    assert out.read_bytes() == before
    (tmp_path / "only-pub.pub").write_text("x")
    assert assert_clean_error(run_cli("keygen", "--out", str(tmp_path / "only-pub")), 2)
    assert not (tmp_path / "only-pub").exists()


def test_checkpoint_and_verify_on_the_command_line(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path, migrated_url: str, tmp_path: Path
) -> None:
    """checkpoint --out writes a file (a folder gets a new file each run); verify --checkpoint exits 0, then 1 naming the thread once the log is re-forged."""
    store, _ = signed
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    first = run_cli("checkpoint", "--key", str(key), "--out", str(folder), db=migrated_url)
    assert first.returncode == 0, first.stderr
    store.record_route("t-alice", "finish", run_id="r2")
    assert run_cli("checkpoint", "--key", str(key), "--out", str(folder), db=migrated_url).returncode == 0
    files = sorted(folder.iterdir())
    assert len(files) == 2
    oldest = files[0]
    assert json.loads(oldest.read_text())["position"] == 15
    assert run_cli("checkpoint", "--key", str(key), "--out", str(oldest), db=migrated_url).returncode == 2

    stdout = run_cli("checkpoint", "--key", str(key), "--previous", str(files[1]), db=migrated_url)
    assert stdout.returncode == 0, stdout.stderr
    assert parse_checkpoint(stdout.stdout).position == 16

    ok = run_cli("verify", "--checkpoint", str(oldest), "--public-key", str(pub), db=migrated_url)
    assert ok.returncode == 0, ok.stderr
    assert "holds everything it committed to" in ok.stdout

    first_bob = store.history("t-bob")[0]
    reforge(store, "t-bob", lambda e: {"actor": "alice"} if e.version == 4 else None)
    broken = run_cli("verify", "--checkpoint", str(oldest), "--public-key", str(pub), db=migrated_url)
    line = assert_clean_error(broken, 1)
    # The first event that may differ: no checkpoint saw t-bob before its answer.
    assert "'t-bob' at position " + str(first_bob.position) in line

    assert "--public-key" in assert_clean_error(run_cli("verify", "--checkpoint", str(oldest), db=migrated_url), 2)
    edited = tmp_path / "edited.json"
    edited.write_text(oldest.read_text().replace('"position": 15', '"position": 14'))
    assert "edited" in assert_clean_error(
        run_cli("verify", "--checkpoint", str(edited), "--public-key", str(pub), db=migrated_url), 1
    )


def test_bad_key_files_are_refused_with_exit_2(store: InterruptStore, migrated_url: str, tmp_path: Path) -> None:
    """A missing key, a non-PEM file, or a public key given as the signing key: exit 2, nothing signed."""
    junk = tmp_path / "junk"
    junk.write_text("not a key")
    _, public = generate_key(tmp_path / "k")
    for path in (tmp_path / "missing", junk, public):
        assert assert_clean_error(run_cli("checkpoint", "--key", str(path), db=migrated_url), 2)
    with pytest.raises(InvalidInputError):
        store.checkpoint(b"not a key")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM symfonic_checkpoints").scalar_one() == 0


def test_a_checkpoint_document_round_trips_its_id(signed: tuple[InterruptStore, Checkpoint]) -> None:
    """The file's text parses back to the same document and id (what the next checkpoint names)."""
    _, cp = signed
    again = parse_checkpoint(cp.to_json())
    assert again.document == cp.document and again.id == cp.id


# --- chain folders (SPEC §12) -----------------------------------------------------------


def chain_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("checkpoint-*.json"))


def recorded_checkpoints(store: InterruptStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM symfonic_checkpoints").scalar_one())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "chain"
    made.mkdir()
    return made


def test_checkpoint_into_a_chain_folder_follows_its_newest_valid_file(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path, migrated_url: str, folder: Path, tmp_path: Path
) -> None:
    """checkpoint --chain DIR writes each checkpoint into DIR linked to the newest file there that the key signed; a non-checkpoint, an edited file and another key's file are passed over with a warning on stderr."""
    store, _ = signed
    first = run_cli("checkpoint", "--key", str(key), "--chain", str(folder), db=migrated_url)
    assert first.returncode == 0, first.stderr
    (one,) = chain_files(folder)
    assert str(one) in first.stdout
    store.record_route("t-alice", "finish", run_id="r2")
    assert run_cli("checkpoint", "--key", str(key), "--chain", str(folder), db=migrated_url).returncode == 0
    one_cp, two_cp = (parse_checkpoint(f.read_text()) for f in chain_files(folder))
    assert two_cp.document["previous"] == {"position": one_cp.position, "root": one_cp.root, "id": one_cp.id}
    assert two_cp.position == 16 and two_cp.document["full"] is False

    # Files that must not count, each named higher than the real ones.
    (folder / "checkpoint-99999999T999999999999Z-9999.json").write_text("{not json")
    edited = dict(two_cp.document, position=17, cursor=17)
    (folder / "checkpoint-99999999T999999999999Z-9998.json").write_text(json.dumps(edited))
    other, _ = generate_key(tmp_path / "other")
    with InterruptStore(migrated_url) as elsewhere:
        foreign = elsewhere.checkpoint(other)
    (folder / "checkpoint-99999999T999999999999Z-9997.json").write_text(foreign.to_json())
    (folder / "notes.txt").write_text("not read")

    store.record_route("t-bob", "finish", run_id="r2")
    third = run_cli("checkpoint", "--key", str(key), "--chain", str(folder), db=migrated_url)
    assert third.returncode == 0, third.stderr
    warned = [line for line in third.stderr.splitlines() if "warning: ignored" in line]
    assert len(warned) == 3, third.stderr
    assert all("-999" in line for line in warned) and "notes.txt" not in third.stderr
    newest = parse_checkpoint(max(chain_files(folder), key=lambda f: f.stat().st_mtime_ns).read_text())
    assert newest.position == 17 and newest.document["previous"]["id"] == two_cp.id

    both = run_cli("checkpoint", "--key", str(key), "--chain", str(folder), "--out", str(tmp_path), db=migrated_url)
    assert "--chain" in assert_clean_error(both, 2)
    missing = run_cli("checkpoint", "--key", str(key), "--chain", str(tmp_path / "nowhere"), db=migrated_url)
    assert "not a folder" in assert_clean_error(missing, 2)


def test_the_python_api_takes_a_checkpoint_into_a_chain_folder_alike(
    signed: tuple[InterruptStore, Checkpoint], key: Path, folder: Path
) -> None:
    """store.checkpoint(key, chain=DIR) writes the file and follows the folder's newest; an ignored file is an IgnoredCheckpointFile warning; chain and previous together are refused."""
    from symfonic_store.services.chain import IgnoredCheckpointFile

    store, _ = signed
    first = store.checkpoint(key, chain=folder)
    # An empty folder starts a new chain holding every head: the folder stands alone.
    assert first.document["previous"] is None and len(first.document["heads"]) == 3
    (folder / "junk.json").write_text("[]")
    with pytest.warns(IgnoredCheckpointFile, match="junk.json"):
        second = store.checkpoint(key, chain=str(folder))
    assert second.document["previous"]["id"] == first.id
    assert [parse_checkpoint(f.read_text()).id for f in chain_files(folder)] == [first.id, second.id]
    with pytest.raises(InvalidInputError, match="previous"):
        store.checkpoint(key, chain=folder, previous=second)


def test_a_forged_approval_after_the_checkpoint_tables_were_deleted_is_refused_by_the_chain(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path, migrated_url: str, folder: Path, tmp_path: Path
) -> None:
    """The issue's attack: every checkpoint table emptied, bob's rejection re-forged as alice's approval (hashes, audit columns, projection fixed up; verify() passes). checkpoint --chain refuses naming t-bob, writing nothing; verify --chain fails naming t-bob; a plain checkpoint is the forged fresh chain."""
    store, _ = signed
    assert run_cli("checkpoint", "--key", str(key), "--chain", str(folder), db=migrated_url).returncode == 0
    (kept,) = chain_files(folder)
    # No checkpoint saw t-bob before its answer: the first event it can no longer vouch for.
    first_bob = store.history("t-bob")[0]

    delete_checkpoint_tables(store)
    reforge_answer(store, "t-bob", actor="alice", response={"approved": True}, decision="approve")
    assert [(r.actor, r.response) for r in store.audit(thread_id="t-bob")] == [("alice", {"approved": True})]
    assert store.verify().ok  # chains, heads, audit columns and triggers: fooled

    refused = run_cli("checkpoint", "--key", str(key), "--chain", str(folder), db=migrated_url)
    line = assert_clean_error(refused, 1)
    assert "thread 't-bob'" in line and "extends the newest checkpoint" in line
    assert chain_files(folder) == [kept] and recorded_checkpoints(store) == 0  # nothing written
    with pytest.raises(EvidenceError) as api:
        store.checkpoint(key, chain=folder)
    assert api.value.thread_id == "t-bob" and api.value.position == first_bob.position
    # Even asked to recompute everything, it first proves the log against the folder.
    assert "'t-bob'" in assert_clean_error(
        run_cli("checkpoint", "--key", str(key), "--chain", str(folder), "--full", db=migrated_url), 1
    )

    broken = run_cli("verify", "--chain", str(folder), "--public-key", str(pub), db=migrated_url)
    assert f"thread 't-bob' at position {first_bob.position}" in assert_clean_error(broken, 1)

    # Without the chain, the database's word is all a checkpoint has: a fresh chain that
    # signs the forgery (why the documented cron uses --chain).
    fresh = run_cli("checkpoint", "--key", str(key), "--out", str(tmp_path), db=migrated_url)
    assert fresh.returncode == 0, fresh.stderr
    (signed_forgery,) = chain_files(tmp_path)
    assert parse_checkpoint(signed_forgery.read_text()).document["previous"] is None


def test_a_re_forged_thread_with_no_newer_event_stays_committed_at_its_true_head(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path, migrated_url: str, folder: Path
) -> None:
    """With the checkpoint tables intact, the next checkpoint re-reads only new events: a re-forged thread with no newer event does not stop it, but it commits to that thread's true head, so verify --chain names the thread; its next event makes the checkpoint refuse."""
    store, _ = signed
    first = store.checkpoint(key, chain=folder)
    reforge_answer(store, "t-bob", actor="alice", response={"approved": True}, decision="approve")
    store.record_route("t-alice", "finish", run_id="r2")
    second = store.checkpoint(key, chain=folder)
    assert second.document["previous"]["id"] == first.id
    assert [h[0] for h in second.document["heads"]] == ["t-alice"]  # t-bob: its true head kept
    assert [p.thread_id for p in check(store, second, pub).problems] == ["t-bob"]
    report = store.verify_chain(folder, public_keys=[pub])
    assert not report.ok and "thread 't-bob'" in report.problems[0]
    assert "'t-bob'" in assert_clean_error(
        run_cli("verify", "--chain", str(folder), "--public-key", str(pub), db=migrated_url), 1
    )
    store.record_route("t-bob", "finish", run_id="r2")
    with pytest.raises(EvidenceError) as refused:
        store.checkpoint(key, chain=folder)
    assert refused.value.thread_id == "t-bob"
    assert len(chain_files(folder)) == 2


def test_a_chain_whose_newest_file_the_database_never_recorded_is_proven_and_continued(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path, migrated_url: str, folder: Path
) -> None:
    """The database's record is not the folder's newest (tables emptied, or a checkpoint taken elsewhere after it): an untouched log is proven against the file, every head recomputed, and the chain goes on linked to the file; verify --chain passes."""
    store, _ = signed
    first = store.checkpoint(key, chain=folder)
    store.record_route("t-alice", "finish", run_id="r2")
    elsewhere = store.checkpoint(key)  # recorded, never written into the folder
    second = store.checkpoint(key, chain=folder)
    assert second.document["previous"]["id"] == first.id != elsewhere.id
    assert second.document["full"] is False and second.document["threads"] == 3
    assert len(second.document["heads"]) == 3  # recomputed, all listed
    delete_checkpoint_tables(store)
    store.record_route("t-bob", "finish", run_id="r2")
    third = store.checkpoint(key, chain=folder)
    assert third.document["previous"]["id"] == second.id
    store.record_route("t-other", "finish", run_id="r2")
    fourth = store.checkpoint(key, chain=folder)  # the kept state is the folder's again
    assert [h[0] for h in fourth.document["heads"]] == ["t-other"]
    assert check(store, fourth, pub).ok
    ok = run_cli("verify", "--chain", str(folder), "--public-key", str(pub), db=migrated_url)
    assert ok.returncode == 0, ok.stderr
    assert "4 checkpoint file(s), linked" in ok.stdout and "holds everything it committed to" in ok.stdout


def test_altered_kept_state_under_a_chain_is_refused_and_full_proves_before_recomputing(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path, folder: Path
) -> None:
    """Kept heads edited: checkpoint --chain refuses like a plain one; with --full it proves the log against the folder's newest file, recomputes, and stays linked to it (full: false); bucket hashes edited, the kept state is not the file's and the proof is taken at once."""
    store, _ = signed
    first = store.checkpoint(key, chain=folder)
    store.record_route("t-alice", "finish", run_id="r2")
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE symfonic_checkpoint_heads SET version = version + 1 WHERE thread_id = 't-alice'")
    with pytest.raises(EvidenceError, match="altered"):
        store.checkpoint(key, chain=folder)
    second = store.checkpoint(key, chain=folder, full=True)
    assert second.document["previous"]["id"] == first.id and second.document["full"] is False
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE symfonic_checkpoint_buckets SET threads = threads + 1")
    third = store.checkpoint(key, chain=folder)
    assert third.document["previous"]["id"] == second.id
    assert store.verify_chain(folder, public_keys=[pub]).ok


def test_verify_chain_checks_every_link_of_the_folder(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path, migrated_url: str, folder: Path
) -> None:
    """verify --chain fails on a file removed from the middle, an edited file, and a restart (--full) whose earlier file the log no longer holds; it needs --public-key."""
    store, _ = signed
    for thread in ("t-alice", "t-bob", "t-other"):
        store.checkpoint(key, chain=folder)
        store.record_route(thread, "finish", run_id="r2")
    store.checkpoint(key, chain=folder)
    files = chain_files(folder)
    assert store.verify_chain(folder, public_keys=[pub]).ok

    middle = files[1].read_text()
    files[1].unlink()
    gap = store.verify_chain(folder, public_keys=[pub])
    assert not gap.ok and "not in the folder" in gap.problems[0]
    files[1].write_text(middle.replace('"threads": 3', '"threads": 4'))
    edited = run_cli("verify", "--chain", str(folder), "--public-key", str(pub), db=migrated_url)
    assert str(files[1].name) in assert_clean_error(edited, 1)
    files[1].write_text(middle)
    assert store.verify_chain(folder, public_keys=[pub]).ok

    # A plain --full restart after a forgery, put into the folder: the file before it fails.
    reforge(store, "t-bob", lambda e: {"actor": "alice"} if e.version == 4 else None)
    restart = store.checkpoint(key, full=True)
    assert check(store, restart, pub).ok
    (folder / "checkpoint-99991231T000000000000Z-restart.json").write_text(restart.to_json())
    report = store.verify_chain(folder, public_keys=[pub])
    assert not report.ok and any("'t-bob'" in p for p in report.problems)

    assert "--public-key" in assert_clean_error(run_cli("verify", "--chain", str(folder), db=migrated_url), 2)


def test_a_rotated_key_continues_the_chain_when_the_old_public_key_is_given(
    signed: tuple[InterruptStore, Checkpoint], key: Path, pub: Path, migrated_url: str, folder: Path, tmp_path: Path
) -> None:
    """After a rotation, checkpoint --chain --public-key OLD.pub follows the old key's newest file; verify --chain with both keys passes, with the new key alone it fails; --public-key without --chain is refused."""
    store, _ = signed
    old = store.checkpoint(key, chain=folder)
    new_key, new_pub = generate_key(tmp_path / "rotated")
    store.record_route("t-alice", "finish", run_id="r2")
    done = run_cli("checkpoint", "--key", str(new_key), "--chain", str(folder), "--public-key", str(pub), db=migrated_url)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    rotated = parse_checkpoint(chain_files(folder)[-1].read_text())
    assert rotated.document["previous"]["id"] == old.id and rotated.key_id != old.key_id
    both = run_cli("verify", "--chain", str(folder), "--public-key", str(pub), "--public-key", str(new_pub), db=migrated_url)
    assert both.returncode == 0, both.stderr
    alone = run_cli("verify", "--chain", str(folder), "--public-key", str(new_pub), db=migrated_url)
    assert "not among the given public keys" in assert_clean_error(alone, 1)
    stray = run_cli("checkpoint", "--key", str(new_key), "--public-key", str(pub), db=migrated_url)
    assert "--chain" in assert_clean_error(stray, 2)


def test_checkpoints_racing_into_one_folder_never_fork_its_chain(
    store: InterruptStore, key: Path, pub: Path, folder: Path
) -> None:
    """Two runs taking checkpoints into the same folder at once (an overlapping cron) take turns: every file follows the one before it, and verify_chain passes."""
    refund(store, "t-0")
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def take() -> None:
        try:
            start.wait()
            for _ in range(3):
                store.checkpoint(key, chain=folder)
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=take) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not failures, failures
    assert len(chain_files(folder)) == 6
    report = store.verify_chain(folder, public_keys=[pub])
    assert report.ok, str(report)


async def test_the_async_store_takes_and_verifies_chains_alike(
    astore: AsyncInterruptStore, migrated_url: str, key: Path, pub: Path, folder: Path
) -> None:
    """AsyncInterruptStore.checkpoint(chain=...) and verify_chain run the same plans."""
    sync = InterruptStore(migrated_url)
    try:
        refund(sync, "t-a")
    finally:
        sync.close()
    first = await astore.checkpoint(key, chain=folder)
    assert (await astore.verify_chain(folder, public_keys=[pub])).ok
    second = await astore.checkpoint(key, chain=folder)
    assert second.document["previous"]["id"] == first.id


# --- parallel writers (PostgreSQL, SPEC §10 and §11) -----------------------------------


def _checkpoint_beside_a_held_writer(
    owner: InterruptStore, url: str, key: Path
) -> tuple[Checkpoint, int, bool]:
    """A mint held open at position p, a route decision committed at p + 1 by a second
    writer, then a checkpoint taken while p is still in flight; p commits once the
    checkpoint is either done or waiting for the writers' lock. Returns the checkpoint,
    p, and whether the checkpoint was seen waiting."""
    from test_gap_safe_readers import WAIT, hold_mint_open

    from symfonic_store.db.engines import create_sync_engine

    holder = create_sync_engine(url)
    second = InterruptStore(url)
    outcome: list[Checkpoint | BaseException] = []
    try:
        with holder.connect() as t1:
            tx1 = hold_mint_open(t1, "held")
            held = int(t1.execute(sa.select(sa.func.max(EVENTS.c.position))).scalar_one())
            second.record_route("late", "finish", run_id="r1")

            def take() -> None:
                try:
                    outcome.append(owner.checkpoint(key))
                except BaseException as exc:  # reported by the assertion below
                    outcome.append(exc)

            taker = threading.Thread(target=take)
            taker.start()
            # Outside a transaction: one of the store's would take the writers' lock in
            # SHARE mode and queue behind the checkpoint's request.
            with holder.connect().execution_options(isolation_level="AUTOCOMMIT") as watch:
                seen_waiting = _until(watch, lambda: not taker.is_alive(), "ExclusiveLock")
            tx1.commit()
        taker.join(timeout=WAIT)
        assert len(outcome) == 1 and isinstance(outcome[0], Checkpoint), outcome
        return outcome[0], held, seen_waiting
    finally:
        second.close()
        holder.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("isolation", "fast"),
    [(None, True), ("REPEATABLE READ", True), ("SERIALIZABLE", True), ("REPEATABLE READ", False)],
    ids=["default", "repeatable-read", "serializable", "repeatable-read-core"],
)
def test_a_checkpoint_waits_for_a_writer_in_flight_so_its_late_commit_is_no_insertion(
    postgres_schema_url: str, key: Path, pub: Path, isolation: str | None, fast: bool
) -> None:
    """A checkpoint taken while an append at a lower position is still open waits for it, covers it, and verifies once it commits; later appends do not disturb it. Whatever the store's engine's isolation level: a checkpoint reads at READ COMMITTED, so its read of the position sees what committed while it waited."""
    options: dict[str, object] = {"execution_options": {"symfonic_fast_path": fast}}
    if isolation is not None:
        options["isolation_level"] = isolation
    with InterruptStore(sa.create_engine(postgres_schema_url, **options)) as owner:  # type: ignore[arg-type]
        owner.setup()
        refund(owner, "t-0")
        cp, held, seen_waiting = _checkpoint_beside_a_held_writer(owner, postgres_schema_url, key)
        assert seen_waiting, "the checkpoint did not wait for the writer in flight"
        assert cp.position >= held + 1
        assert check(owner, cp, pub).ok, str(check(owner, cp, pub))
        owner.record_route("t-0", "finish", run_id="r2")
        assert check(owner, cp, pub).ok


@pytest.mark.postgres
def test_without_the_wait_a_late_commit_below_the_checkpoint_reads_as_an_insertion(
    postgres_schema_url: str, key: Path, pub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same scenario with the wait for writers removed: the checkpoint signs a position whose gap is filled later, and verify reports the held thread."""
    from symfonic_store.db.statements import evidence as statements

    monkeypatch.setattr(statements, "final_max_position", statements.max_position)
    with InterruptStore(postgres_schema_url) as owner:
        owner.setup()
        refund(owner, "t-0")
        cp, held, seen_waiting = _checkpoint_beside_a_held_writer(owner, postgres_schema_url, key)
        assert not seen_waiting and cp.position > held
        report = check(owner, cp, pub)
        assert not report.ok and report.first is not None and report.first.thread_id == "held"


_WAITING_WRITERS_LOCK = sa.text(
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
    "AND mode = :mode AND classid::text::bigint = :key "
    "AND objid::text::bigint = (hashtext(current_schema())::bigint & 4294967295)"
)


def _until(watch: sa.Connection, done: Callable[[], bool], mode: str) -> bool:
    """Poll the server until a session waits for the writers' lock in ``mode`` (True), or
    ``done()`` comes first (False). A wait on a real condition, bounded, never a delay."""
    from test_gap_safe_readers import WAIT

    from symfonic_store.db.executor import WRITERS_LOCK_KEY

    deadline = datetime.now(UTC).timestamp() + WAIT
    while not done() and datetime.now(UTC).timestamp() < deadline:
        if watch.execute(_WAITING_WRITERS_LOCK, {"mode": mode, "key": WRITERS_LOCK_KEY}).scalar_one():
            return True
    return False


@pytest.mark.postgres
def test_a_writer_that_starts_while_the_checkpoint_reads_its_position_waits_for_it(
    postgres_schema_url: str, key: Path, pub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append that begins between the checkpoint's wait for the writers and its read of the last position is shut out until the position is read, so it lands above it."""
    from symfonic_store.db.statements import evidence as statements

    real_max_position = statements.max_position
    late: list[BaseException | None] = []
    seen_waiting: list[bool] = []

    with InterruptStore(postgres_schema_url) as owner, InterruptStore(postgres_schema_url) as second:
        owner.setup()
        refund(owner, "t-0")
        watch = sa.create_engine(postgres_schema_url).connect().execution_options(isolation_level="AUTOCOMMIT")

        def append() -> None:
            try:
                second.record_route("late", "finish", run_id="r1")
                late.append(None)
            except BaseException as exc:  # reported by the assertion below
                late.append(exc)

        writers: list[threading.Thread] = []

        def read_position(conn: sa.Connection) -> int:
            writer = threading.Thread(target=append)
            writers.append(writer)
            writer.start()  # a new write transaction, begun with the checkpoint inside
            seen_waiting.append(_until(watch, lambda: bool(late), "ShareLock"))
            return real_max_position(conn)

        monkeypatch.setattr(statements, "max_position", read_position)
        try:
            cp = owner.checkpoint(key)
        finally:
            monkeypatch.setattr(statements, "max_position", real_max_position)
        for writer in writers:
            writer.join(timeout=30)
        watch.close()
        assert seen_waiting == [True], "the new writer was not shut out while the position was read"
        assert late == [None]
        (event,) = [e for e in owner.events() if e.thread_id == "late"]
        assert event.position > cp.position
        assert check(owner, cp, pub).ok, str(check(owner, cp, pub))


@pytest.mark.postgres
def test_a_callers_open_transaction_holds_neither_checkpoints_nor_appends(
    postgres_schema_url: str, key: Path, pub: Path
) -> None:
    """A transaction the caller keeps open on the store's engine (reads, nothing written) is not among the writers: a checkpoint and an append both finish while it is open."""
    with InterruptStore(postgres_schema_url) as store:
        store.setup()
        refund(store, "t-0")
        with store.engine.connect() as caller:
            tx = caller.begin()
            caller.exec_driver_sql("SELECT 1")
            cp = store.checkpoint(key)
            store.record_route("t-1", "finish", run_id="r1")
            tx.rollback()
        assert check(store, cp, pub).ok
        assert [e.thread_id for e in store.events()][-1] == "t-1"


@pytest.mark.postgres
def test_a_write_transaction_left_open_makes_the_checkpoint_give_up_not_the_appends(
    postgres_schema_url: str, key: Path, pub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write transaction that stays open past the wait: the checkpoint is refused (nothing signed) instead of holding every append behind it, and appends go on."""
    from test_gap_safe_readers import hold_mint_open

    from symfonic_store.db.backends import postgres
    from symfonic_store.db.engines import create_sync_engine

    monkeypatch.setattr(postgres, "WRITERS_WAIT_TIMEOUT", "200ms")
    holder = create_sync_engine(postgres_schema_url)
    with InterruptStore(postgres_schema_url) as store:
        store.setup()
        refund(store, "t-0")
        try:
            with holder.connect() as t1:
                tx1 = hold_mint_open(t1, "held")
                with pytest.raises(EvidenceError, match="stayed open"):
                    store.checkpoint(key)
                store.record_route("t-1", "finish", run_id="r1")  # not queued behind it
                tx1.commit()
        finally:
            holder.dispose()
        cp = store.checkpoint(key)
        assert cp.document["previous"] is None  # the refused one was never recorded
        assert check(store, cp, pub).ok


@pytest.mark.postgres
def test_a_shorter_statement_timeout_ends_the_wait_with_the_same_refusal(
    postgres_schema_url: str, key: Path
) -> None:
    """A session statement_timeout shorter than the wait for the writers cancels it: the same refusal, nothing signed, not a bare database error."""
    from test_gap_safe_readers import hold_mint_open

    from symfonic_store.db.engines import create_sync_engine

    url = postgres_schema_url.replace("options=", "options=-cstatement_timeout%3D300%20", 1)
    assert url != postgres_schema_url
    holder = create_sync_engine(postgres_schema_url)
    with InterruptStore(postgres_schema_url) as owner, InterruptStore(url) as hurried:
        owner.setup()
        refund(owner, "t-0")
        try:
            with holder.connect() as t1:
                tx1 = hold_mint_open(t1, "held")
                with pytest.raises(EvidenceError, match="statement_timeout"):
                    hurried.checkpoint(key)
                tx1.commit()
        finally:
            holder.dispose()
        assert owner.checkpoint(key).document["previous"] is None
