"""The inbox's pages (``Approvals.inbox``): every page, first, later or filtered, asks the
store for one more than a page after its cursor (``list_pending``'s keyset pages); together
they list every open interrupt once, oldest first, on each backend."""

from __future__ import annotations

from typing import Any

import factories
import pytest

from symfonic_store import InterruptStore
from symfonic_store.server.approvals import Approvals
from symfonic_store.server.principal import Principal


def _open(store: InterruptStore, count: int) -> list[tuple[str, str]]:
    return [(f"page-{n:02d}", str(factories.mint(store, f"page-{n:02d}", payload={"n": n})["interrupt_id"]))
            for n in range(count)]


def _ids(page: dict[str, Any]) -> list[tuple[str, str]]:
    return [(i["thread_id"], i["interrupt_id"]) for i in page["items"]]


def test_the_first_page_reads_a_page_and_later_pages_follow_it(store: InterruptStore,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    minted = _open(store, 7)
    approvals = Approvals(store)
    asked: list[int | None] = []
    real = store.list_pending

    def spy(**kwargs: Any) -> Any:
        asked.append(kwargs.get("limit"))
        return real(**kwargs)

    monkeypatch.setattr(store, "list_pending", spy)
    seen: list[tuple[str, str]] = []
    page = approvals.inbox(limit=3)
    seen += _ids(page)
    while page["next"] is not None:
        page = approvals.inbox(limit=3, after=page["next"])
        seen += _ids(page)
    assert seen == minted
    assert asked == [4, 4, 4]  # one past each page, later pages too: the store's keyset pages
    assert _ids(approvals.inbox(limit=50)) == minted and asked[-1] == 51
    assert _ids(approvals.inbox(limit=3, name=factories.NAME)) == minted[:3] and asked[-1] == 4


def test_a_page_after_an_interrupt_answered_meanwhile_goes_on_from_its_place(store: InterruptStore) -> None:
    minted = _open(store, 6)
    approvals = Approvals(store)
    first = approvals.inbox(limit=2)
    assert _ids(first) == minted[:2]
    # The last one shown is answered before the next page is asked for.
    store.resume(*minted[1], {"approved": True}, actor="alice")
    second = approvals.inbox(limit=2, after=first["next"])
    assert _ids(second) == minted[2:4]
    digest = second["items"][0]["digest"]
    result = approvals.answer(Principal("bob"), *minted[2], {"approved": True}, digest)
    assert result.status == 200
    assert _ids(approvals.inbox(limit=50)) == [minted[0], *minted[3:]]
