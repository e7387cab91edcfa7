"""``settle``: an operator says what became of an answer whose outcome is unknown."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from ..app import app, choice, flag, get_session
from ..render import say


class SettleAs(StrEnum):
    taken = "taken"
    not_taken = "not-taken"


@app.command()
def settle(
    ctx: typer.Context,
    thread_id: Annotated[str, typer.Argument(metavar="THREAD", help="The interrupt's thread.")],
    interrupt_id: Annotated[str, typer.Argument(metavar="INTERRUPT_ID", help="The interrupt.")],
    as_: Annotated[
        SettleAs,
        typer.Option(
            "--as",
            help="taken: the graph acted on the claimed answer (recorded as resumed, by the "
            "claimant); not-taken: it did not (recorded as not_taken, the interrupt is open "
            "again).",
            parser=flag(choice(SettleAs)),
        ),
    ],
    actor: Annotated[
        str, typer.Option("--actor", metavar="NAME", help="Who settles it (recorded as settled_by).")
    ],
) -> None:
    """Settle an answer whose outcome is unknown (a sweep recorded outcome_unknown).

    Until it is settled the interrupt refuses every answer: its answering process stopped
    after claiming it, and the checkpoint does not show the answer taken, so the graph may
    have acted. Look at what the graph did (its side effects), then say so.
    """
    taken = as_ is SettleAs.taken
    with get_session(ctx).store() as store:
        store.settle(thread_id, interrupt_id, outcome="taken" if taken else "not_taken", actor=actor)
    what = (
        "recorded as resumed (the claimant's answer)"
        if taken
        else "recorded as not taken; the interrupt is open again"
    )
    say(f"settled interrupt {interrupt_id!r} on thread {thread_id!r} as {as_.value}: {what}")
