"""The two stores have one public surface: same methods, parameters and docstrings.

``InterruptStore`` and ``AsyncInterruptStore`` drive the same plans (store/ops.py); this
checks that nothing drifts between them. The documented differences are the only ones
allowed: the async store also has ``aclose`` (its ``close`` is a coroutine too), its
context manager is ``async with``, its value methods are coroutine functions, and its
streaming methods (``iter_events``, ``replay``) return async-iterable results instead of
iterators.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from symfonic_store import AsyncInterruptStore, InterruptStore, build_interrupt_marker

STREAMING = {"iter_events", "replay"}
FACTORIES = {"recording_checkpointer", "checkpointer"}  # return a checkpointer at once, on both stores
ASYNC_ONLY = {"aclose"}  # the async twin of close(); the async store has close() as well
CONTEXT_PAIRS = {"__enter__": "__aenter__", "__exit__": "__aexit__"}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def is_property(cls: type, name: str) -> bool:
    return isinstance(inspect.getattr_static(cls, name), property)


def parameters(fn: Any, *, annotations: bool = True) -> list[tuple[Any, ...]]:
    """Each parameter's name, kind, default (and annotation): what a caller relies on."""
    return [
        (p.name, p.kind, p.default, *((p.annotation,) if annotations else ()))
        for p in inspect.signature(fn).parameters.values()
    ]


def test_every_public_name_of_one_store_is_on_the_other() -> None:
    """The public names match, except aclose, the async store's documented twin of close."""
    sync, aio = public(InterruptStore), public(AsyncInterruptStore)
    assert sync - aio == set(), f"only on InterruptStore: {sorted(sync - aio)}"
    assert aio - sync == ASYNC_ONLY, f"only on AsyncInterruptStore: {sorted(aio - sync - ASYNC_ONLY)}"
    assert len(sync) > 15, "the surface looks empty: the check would be vacuous"


@pytest.mark.parametrize("name", sorted(public(InterruptStore)))
def test_each_method_has_the_same_parameters_and_docstring_on_both(name: str) -> None:
    """Same parameters (names, kinds, defaults, annotations) and the same docstring, method by method."""
    sync = inspect.getattr_static(InterruptStore, name)
    aio = inspect.getattr_static(AsyncInterruptStore, name)
    if is_property(InterruptStore, name):
        assert is_property(AsyncInterruptStore, name), name
        assert sync.__doc__ and sync.__doc__ == aio.__doc__
        return
    sync_fn, aio_fn = getattr(InterruptStore, name), getattr(AsyncInterruptStore, name)
    assert parameters(sync_fn) == parameters(aio_fn)
    assert inspect.getdoc(sync_fn), f"{name} has no docstring"
    assert inspect.getdoc(sync_fn) == inspect.getdoc(aio_fn)
    if name not in STREAMING:
        sync_returns = inspect.signature(sync_fn).return_annotation
        assert sync_returns == inspect.signature(aio_fn).return_annotation, name


def test_the_constructors_take_the_same_options() -> None:
    """Both constructors take the same options with the same defaults (the URL or an engine of their kind)."""
    sync = parameters(InterruptStore.__init__, annotations=False)
    aio = parameters(AsyncInterruptStore.__init__, annotations=False)
    assert sync == aio
    without_engine = lambda fn: [p for p in parameters(fn) if p[0] != "url_or_engine"]  # noqa: E731
    assert without_engine(InterruptStore.__init__) == without_engine(AsyncInterruptStore.__init__)


@pytest.mark.parametrize("name", sorted(public(AsyncInterruptStore) - STREAMING - FACTORIES))
def test_the_async_methods_are_coroutine_functions(name: str) -> None:
    """Every async method that returns a value (close and aclose too) is a coroutine function."""
    if is_property(AsyncInterruptStore, name):
        return
    assert inspect.iscoroutinefunction(getattr(AsyncInterruptStore, name)), name


def test_the_context_managers_are_a_documented_pair() -> None:
    """`with InterruptStore(...)` and `async with AsyncInterruptStore(...)`: the same protocol, each in its kind."""
    for sync_name, async_name in CONTEXT_PAIRS.items():
        assert callable(getattr(InterruptStore, sync_name))
        assert not inspect.iscoroutinefunction(getattr(InterruptStore, sync_name))
        assert inspect.iscoroutinefunction(getattr(AsyncInterruptStore, async_name))
    assert inspect.iscoroutinefunction(AsyncInterruptStore.aclose)
    assert inspect.getdoc(AsyncInterruptStore.aclose) == inspect.getdoc(InterruptStore.close)


async def test_the_streaming_methods_return_async_iterables_that_work(
    store: InterruptStore, astore: AsyncInterruptStore
) -> None:
    """iter_events and replay are not coroutines: `async for` over them yields what the sync store's iterators do."""
    for n in range(5):
        marker = build_interrupt_marker(name="approval", interrupt_id=f"i-{n}", payload={"n": n})
        await astore.mint("t-1", marker)
    await astore.resume("t-1", "i-4", {"ok": True}, actor="alice")
    for name in sorted(STREAMING):
        assert not inspect.iscoroutinefunction(getattr(AsyncInterruptStore, name)), name

    streamed = astore.iter_events(page_size=2)
    assert not inspect.iscoroutine(streamed) and hasattr(streamed, "__aiter__")
    events = [event async for event in streamed]
    assert [e.type for e in events].count("interrupt.minted") == 5
    assert len(events) == 10  # 5 mints, 4 supersessions, 1 resume: pages of 2 lose none
    assert events == await astore.events()
    synced = store.iter_events(page_size=2)
    assert isinstance(synced, Iterator)
    assert list(synced) == events

    replayed = [step async for step in astore.replay("t-1")]
    assert isinstance(store.replay("t-1"), Iterator)
    assert replayed == list(store.replay("t-1"))
    assert [event for event, _ in replayed] == events
    assert replayed[-1][1] == await astore.state("t-1")


def test_both_stores_take_the_decisions_of_spec_12() -> None:
    """decisions= on both constructors; audit(decision=), resume/claim(authenticated_by=) on both stores."""
    for cls in (InterruptStore, AsyncInterruptStore):
        assert inspect.signature(cls.__init__).parameters["decisions"].default is None
        assert "decision" in inspect.signature(cls.audit).parameters
        assert "authenticated_by" in inspect.signature(cls.resume).parameters
        assert "authenticated_by" in inspect.signature(cls.claim).parameters
