"""``demo``: the scripted refund agent on a real store."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from ...db.urls import safe_url
from ..app import (
    DEMO_URL,
    PROG,
    app,
    check_database,
    get_session,
)
from ..render import (
    audit_table,
    replay_table,
    say,
)

if TYPE_CHECKING:

    pass


@app.command()
def demo(ctx: typer.Context) -> None:
    """Run a scripted agent: approvals by alice and bob, an expiry, the audit, a replay.

    Uses --db if given, else symfonic_demo.db in the current folder; never
    $SYMFONIC_STORE_URL, so a demo sweep cannot touch a real store.
    """
    from ...demo import run_demo

    session = get_session(ctx)
    url = session.db or DEMO_URL
    session.remember_password(url)
    check_database(url, create=True)  # the demo sets its own store up
    result = run_demo(url, say=say)
    say("")
    audit_table(result.audit)
    say("")
    replay_table(result.replay_thread, result.replay)
    say(
        f"\nExplore the store: {PROG} --db {safe_url(url)} audit "
        f"(or: pending, replay {result.replay_thread}, verify)"
    )
