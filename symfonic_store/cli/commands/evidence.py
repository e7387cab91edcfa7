"""``verify``, ``keygen``, ``checkpoint``, ``archive``, ``verify-archive``: evidence that
survives a database administrator (SPEC §10; docs/evidence.md).

Checkpoints and archives are files the database never holds on its own: these commands
write them exclusively (never over an existing file) and read them back to check.
"""

from __future__ import annotations

import sys
import warnings
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from ...errors import InvalidInputError
from ..app import PROG, Problem, app, flag, get_session, moment
from ..render import emit, say

# Options shared by several commands; the others are declared where they are read, alike
# in shape only (see cli/app.py).
KeyOption = Annotated[
    Path,
    typer.Option("--key", metavar="KEY", help="The Ed25519 private key (PEM) from keygen.", show_default=False),
]
PublicKeys = Annotated[
    list[Path] | None,
    typer.Option(
        "--public-key",
        metavar="KEY.pub",
        help="A public key that may have signed (repeat it for rotated keys).",
        show_default=False,
    ),
]


@app.command()
def verify(
    ctx: typer.Context,
    thread: Annotated[str | None, typer.Option("--thread", metavar="T", help="Only this thread.")] = None,
    checkpoints: Annotated[
        list[Path] | None,
        typer.Option(
            "--checkpoint",
            metavar="FILE",
            help="Also prove the log still holds what this signed checkpoint committed to "
            "(repeatable: earlier ones also help name what changed).",
            show_default=False,
        ),
    ] = None,
    public_keys: PublicKeys = None,
    # Options alike in shape only (see cli/app.py), deliberately declared where they are read.
    archives: Annotated[
        list[Path] | None,
        typer.Option(
            "--archive",
            metavar="FILE",
            help="An archive holding threads moved out since the checkpoint (repeatable).",
            show_default=False,
        ),
    ] = None,
    chain: Annotated[
        Path | None,
        typer.Option(
            "--chain",
            metavar="DIR",
            help="Check the chain of checkpoint files in DIR (each signed, each naming the one "
            "before it) and prove the log still holds what the newest committed to.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check the hash chains, projection heads and append-only triggers; exit 1 on a problem.

    With --chain or --checkpoint, also prove the log still holds what signed checkpoints
    committed to.
    """
    files = list(checkpoints or [])
    keys = list(public_keys or [])
    if (files or chain is not None) and not keys:
        raise InvalidInputError("--public-key", "is required with --chain and --checkpoint")
    if (keys or archives) and not files and chain is None:
        raise InvalidInputError("--chain", "(or --checkpoint) is required with --public-key and --archive")
    with get_session(ctx).store() as store:
        report = store.verify(thread)
        linked = None
        if chain is not None:
            linked = store.verify_chain(chain, public_keys=keys, archives=list(archives or []), thread_id=thread)
        checked = [
            store.verify_checkpoint(
                f, public_keys=keys, archives=list(archives or []), thread_id=thread,
                chain=[c for c in files if c != f],
            )
            for f in files
        ]
    say(str(report))
    if linked is not None:
        say(str(linked))
    for file, result in zip(files, checked, strict=True):
        result.source = f"checkpoint {str(file)!r}"
        say(str(result))
    if linked is not None and not linked.ok:
        raise Problem(f"the chain {str(chain)!r} does not hold; first: {linked.problems[0]}")
    failed = [(f, r) for f, r in zip(files, checked, strict=True) if not r.ok]
    if failed:
        file, result = failed[0]
        raise Problem(f"the log does not hold what checkpoint {str(file)!r} committed to; first: {result.first}")
    missing = report.missing
    if chain is not None:
        # The chain folder stands in for the checkpoint tables: without them the log is
        # still proven against it, so only their absence is said.
        from ...db.tables import CHECKPOINT_TABLES

        spared = [t for t in missing if t in {table.name for table in CHECKPOINT_TABLES}]
        missing = [t for t in missing if t not in spared]
        if spared:
            sys.stderr.write(
                f"{PROG}: warning: the checkpoint table(s) {', '.join(spared)} are missing: the "
                f"chain was checked from the log and the folder alone; `{PROG} db guards "
                "--restore` recreates them\n"
            )
    if missing:
        raise Problem(
            f"missing table(s) of the store's schema: {', '.join(missing)} (`{PROG} db guards "
            "--restore` recreates them, empty; `db upgrade` does not: the schema is at head)"
        )
    if report.broken or report.guards:
        first = report.broken[0] if report.broken else report.guards[0]
        problems = len(report.broken) + len(report.guards)
        raise Problem(f"{problems} problem(s) found; first: {first}")


@app.command()
def keygen(
    out: Annotated[
        Path,
        typer.Option("--out", metavar="KEY", help="Where to write the private key (KEY.pub: the public one).", show_default=False),
    ],
) -> None:
    """Make an Ed25519 key pair for checkpoints and archives (never over an existing key)."""
    from ...services.evidence.keys import generate_key, key_id, load_public_key

    private, public = generate_key(out)
    say(
        f"wrote the private key {str(private)!r} (mode 0600: keep it off the database host) and "
        f"the public key {str(public)!r} (key id {key_id(load_public_key(public))})"
    )


@app.command()
def checkpoint(
    ctx: typer.Context,
    key: KeyOption,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="FILE|DIR",
            help="Write the checkpoint here (a folder: a new file named by time and position); "
            "else to stdout.",
            show_default=False,
        ),
    ] = None,
    previous: Annotated[
        Path | None,
        typer.Option(
            "--previous",
            metavar="FILE",
            help="Refuse unless this is the latest checkpoint the store recorded.",
            show_default=False,
        ),
    ] = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Recompute every thread's head from the log (without --chain: a new start "
            "after a refusal).",
        ),
    ] = False,
    chain: Annotated[
        Path | None,
        typer.Option(
            "--chain",
            metavar="DIR",
            help="Follow the newest checkpoint in DIR signed by KEY (whatever the database "
            "recorded) and write the new one there; refuse if the log no longer extends it.",
            show_default=False,
        ),
    ] = None,
    public_keys: Annotated[
        list[Path] | None,
        typer.Option(
            "--public-key",
            metavar="KEY.pub",
            help="With --chain: files in DIR signed by this key count too (the old key after "
            "a rotation; repeatable).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Sign a checkpoint of the whole log up to its current position (from cron: use --chain)."""
    from ...services.chain import IgnoredCheckpointFile, file_name, write_new

    if chain is not None and (out is not None or previous is not None):
        raise InvalidInputError("--chain", "replaces --out and --previous: give only --chain")
    if public_keys and chain is None:
        raise InvalidInputError("--public-key", "counts only with --chain")
    if out is not None and out.exists() and not out.is_dir():
        # Checked before signing: a checkpoint the store records but nobody keeps would
        # make the next `--previous` run refuse.
        raise InvalidInputError("--out", f"{str(out)!r} exists: a checkpoint file is never overwritten")
    session = get_session(ctx)
    with session.store() as store, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", IgnoredCheckpointFile)
        try:
            taken = store.checkpoint(
                key, previous=previous, full=full, chain=chain, public_keys=list(public_keys or [])
            )
        finally:
            for warning in seen:
                if issubclass(warning.category, IgnoredCheckpointFile):
                    sys.stderr.write(session.redact(f"{PROG}: warning: {warning.message}") + "\n")
    if chain is not None:
        say(f"wrote {str(chain / file_name(taken))!r}: {taken}")
        return
    text = taken.to_json()
    if out is None:
        emit(text)
        return
    target = out / file_name(taken) if out.is_dir() else out
    write_new(target, text, option="--out")
    say(f"wrote {str(target)!r}: {taken}")


@app.command()
def archive(
    ctx: typer.Context,
    before: Annotated[
        datetime,
        typer.Option(
            "--before",
            metavar="ISO",
            help="Archive whole finished threads whose last event is before this time (no offset: UTC).",
            parser=flag(moment),
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", metavar="FILE", help="The archive (JSON Lines; gzip when it ends in .gz).", show_default=False),
    ],
    key: Annotated[
        Path | None,
        typer.Option("--key", metavar="KEY", help="Sign the archive's manifest with this key.", show_default=False),
    ] = None,
) -> None:
    """Move whole finished threads into a verified archive, then out of the tables."""
    with get_session(ctx).store() as store:
        result = store.archive(before, out, key=key)
    say(str(result))


@app.command("verify-archive")
def verify_archive(
    file: Annotated[Path, typer.Argument(metavar="FILE", show_default=False)],
    public_keys: PublicKeys = None,
) -> None:
    """Check an archive offline: its chains, its manifest and (with --public-key) its signature."""
    from ...services.archive import verify_archive as check_archive
    from ...services.evidence.keys import keys_by_id

    keys = keys_by_id(public_keys or [])
    check = check_archive(file, keys or None)
    say(str(check))
    if not check.ok:
        raise Problem(f"the archive {str(file)!r} does not verify; first: {check.problems[0]}")
