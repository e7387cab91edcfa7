"""The seed's marker protocol in a graph: the interrupt node, the recording router, a tools node.

Wiring, in short (see README): the agent node routes through
``make_interrupt_router(store)`` to ``"interrupt"`` (the node from
:func:`create_interrupt_node`), ``"continue"`` (the tools node) or ``"finish"``; the
tools node routes through the same router so an interrupt a tool raised pauses the
graph before the model is called again.

The node and router run under ``invoke`` and under ``ainvoke``/``astream``: each is a
:class:`GraphCallable` carrying a sync and an async body. With an
:class:`~symfonic_store.AsyncInterruptStore` only the async entry points work.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Annotated, Any, TypedDict, cast

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from .. import validation
from ..compat import NOT_VISIBLE as _NOT_VISIBLE
from ..compat import RunnableCallable, task_resume
from ..errors import InvalidInputError
from ..protocol import (
    PENDING_KEY,
    build_interrupt_marker,
    interrupt_condition,
    interrupt_value,
    new_interrupt_id,
    normalize_response,
    response_updates,
)
from ..store.runner import is_async_store
from .actor import actor_of, tenant_of
from .checkpointer import own_checkpointer

if TYPE_CHECKING:
    from ..store import AsyncInterruptStore, InterruptStore

    AnyStore = InterruptStore | AsyncInterruptStore

logger = logging.getLogger(__name__)


def _keep_last(_old: Any, new: Any) -> Any:
    return new


class InterruptState(TypedDict, total=False):
    """A graph state with the channels the interrupt protocol uses.

    Extend it (``class MyState(InterruptState): ...``) or copy the keys into your own.
    """

    messages: Annotated[list[AnyMessage], add_messages]
    _interrupt_pending: Annotated[dict[str, Any] | None, _keep_last]
    _interrupt_response: Annotated[dict[str, Any] | None, _keep_last]
    _ask_user_pending: Annotated[dict[str, Any] | None, _keep_last]
    run_id: Annotated[str | None, _keep_last]


class GraphCallable(RunnableCallable):
    """A LangGraph runnable with a sync and an async body, callable like the function it wraps.

    LangGraph picks the sync or the async body by how the graph is run; calling the
    object directly (``router(state, config)``) runs the sync body, as a path function
    or node function would be called. It is the runnable LangGraph itself makes of a
    plain node or path function (no callback run of its own inside the node's: a
    router evaluated at every step costs what a plain path function costs).
    """

    def __init__(
        self,
        func: Callable[..., Any],
        afunc: Callable[..., Awaitable[Any]] | None = None,
        *,
        name: str | None = None,
    ) -> None:
        super().__init__(func, afunc, name=name, trace=False)

    def __call__(self, state: Any, config: RunnableConfig | None = None) -> Any:
        return self.invoke(state, config)


# --- helpers shared by the node and the router -----------------------------------


def _thread_id(config: RunnableConfig | None) -> str:
    return validation.config_thread_id(
        config,
        "a store-aware node or router needs the graph's thread id; "
        'invoke the graph with config={"configurable": {"thread_id": ...}}',
    )


def _actor(config: RunnableConfig | None) -> tuple[str | None, str | None]:
    """Who answers through the node, and how that was established (the Agent Server's
    authenticated user, or None: the caller's claim)."""
    who = actor_of(config)
    return who.name, who.authenticated_by


def _is_async_store(store: Any) -> bool:
    return is_async_store(store)


def _check_store(store: Any, method: str, what: str) -> None:
    # Fail where the graph is built, not on the first run with a confusing AttributeError.
    if not callable(getattr(store, method, None)):
        raise InvalidInputError(
            "store", f"{what} needs an InterruptStore or AsyncInterruptStore, got {type(store).__name__}"
        )


def _in_step(store: Any, config: RunnableConfig | None) -> AbstractContextManager[None]:
    """Defer the store's writes into the step's checkpoint transaction, when the graph's
    checkpointer is ``store.checkpointer()`` (one COMMIT for the step and its events)."""
    saver = own_checkpointer(store, config)
    return nullcontext() if saver is None else saver.defer_writes(config)


def _require_sync(store: Any, what: str) -> None:
    if _is_async_store(store):
        raise TypeError(
            f"{what} was given an AsyncInterruptStore but the graph was run with "
            "invoke()/stream(); run it with ainvoke()/astream(), or use InterruptStore"
        )


# --- the interrupt node -----------------------------------------------------------


def create_interrupt_node(store: AnyStore | None = None, *, tenant: str | None = None) -> GraphCallable:
    """Return the interrupt node: pause on ``_interrupt_pending``, inject the answer.

    The node calls LangGraph's ``interrupt()`` with the marker's name, id, payload and
    tool call id. When the graph is resumed, the answer becomes a ``ToolMessage`` for
    the originating tool call, or ``_interrupt_response`` for an interrupt raised
    outside a tool; either way the marker is cleared.

    With a ``store``, the node also records the mint the first time it sees a marker
    (its requester, the mint's actor: the Agent Server's authenticated user, else
    ``config["configurable"]["actor"]``, as :func:`~.actor.actor_of` says), and checks every answer against the store: an answer the store already admitted
    (``store.resume``) records nothing new; an answer that bypassed the store is
    admitted by the same rules, with the actor from ``config["configurable"]["actor"]``;
    an answer to an expired, resolved or unknown interrupt is recorded as rejected and
    raises, so the graph stays paused and the answer is never applied. The wake-up the
    sweep sends to an expired interrupt (``{"expired": true, "reason": ...}``) is
    handed to the agent without recording a resume.
    """
    if store is not None:
        _check_store(store, "admit_node_resume", "create_interrupt_node")

    def node(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        pending: dict[str, Any] = state[PENDING_KEY]
        if store is None:
            return _answer_without_store(pending)
        _require_sync(store, "create_interrupt_node")
        sync_store = cast("InterruptStore", store)
        thread_id = _thread_id(config)
        actor, by = _actor(config)
        # Check the answer before interrupt() hands it over (see _incoming_resume).
        incoming = _incoming_resume(config)
        # About to pause: the mint can commit with the step, its requester the caller's
        # actor. An answer is admitted at once, so its mint must be there first (asked
        # by nobody known: whoever answers did not ask).
        with _in_step(store, config) if incoming is None else nullcontext():
            sync_store.mint(thread_id, pending, actor=_requester(actor, incoming), tenant=tenant_of(config, tenant))
        response = None
        if incoming is not None and incoming is not _NOT_VISIBLE:
            response = sync_store.admit_node_resume(thread_id, pending, incoming, actor=actor, authenticated_by=by)
        resume_value = interrupt(interrupt_value(pending))
        if resume_value is None:
            return _unexpected_none(pending)
        if response is None or resume_value is not incoming:
            response = sync_store.admit_node_resume(thread_id, pending, resume_value, actor=actor, authenticated_by=by)
        return response_updates(pending, response)

    async def anode(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        pending: dict[str, Any] = state[PENDING_KEY]
        if store is None:
            return _answer_without_store(pending)
        thread_id = _thread_id(config)
        actor, by = _actor(config)
        incoming = _incoming_resume(config)
        with _in_step(store, config) if incoming is None else nullcontext():
            await _maybe_await(
                store.mint(thread_id, pending, actor=_requester(actor, incoming), tenant=tenant_of(config, tenant))
            )
        response = None
        if incoming is not None and incoming is not _NOT_VISIBLE:
            response = await _maybe_await(
                store.admit_node_resume(thread_id, pending, incoming, actor=actor, authenticated_by=by)
            )
        resume_value = interrupt(interrupt_value(pending))
        if resume_value is None:
            return _unexpected_none(pending)
        if response is None or resume_value is not incoming:
            response = await _maybe_await(
                store.admit_node_resume(thread_id, pending, resume_value, actor=actor, authenticated_by=by)
            )
        return response_updates(pending, response)

    return GraphCallable(node, afunc=anode, name="interrupt")


def _requester(actor: str | None, incoming: Any) -> str | None:
    """The mint's requester (SPEC §12): the call's actor when the node is about to pause,
    nobody known when the call brings an answer (the answerer is not who asked)."""
    return actor if incoming is None else None


def _answer_without_store(pending: dict[str, Any]) -> dict[str, Any]:
    """The seed's node, exactly."""
    resume_value = interrupt(interrupt_value(pending))
    if resume_value is None:
        return _unexpected_none(pending)
    return response_updates(pending, normalize_response(resume_value))


def _incoming_resume(config: RunnableConfig) -> Any:
    """The answer ``interrupt()`` is about to return in this node: a value, or ``None``.

    The store must judge an answer *before* ``interrupt()`` returns it, because
    ``interrupt()`` saves the value it returns as the task's answer: a refused answer
    checked afterwards would stay saved, and every later resume of the thread -- the
    real approver's command included -- would be handed the refused answer again and
    refused again. Refused before it is taken, the answer is never saved, the graph
    stays paused, and the next ``Command(resume=...)`` replaces it.

    This reads LangGraph's per-task scratchpad (the same place ``interrupt()`` reads;
    :func:`symfonic_store.compat.task_resume`): the task's saved or mapped answers first,
    then the run's ``Command(resume=...)``. Returns ``_NOT_VISIBLE`` when the scratchpad
    is not there (a LangGraph that moved it); the node then checks the answer after
    ``interrupt()`` only.
    """
    return task_resume(config.get("configurable") or {})


def _unexpected_none(pending: dict[str, Any]) -> dict[str, Any]:
    # LangGraph never resumes with None (Command(resume=None) is "no resume"); if it
    # ever does, clear the marker rather than loop.
    logger.warning(
        "interrupt node: interrupt() returned None for name=%s interrupt_id=%s",
        pending.get("name"),
        pending.get("interrupt_id"),
    )
    return {PENDING_KEY: None}


async def _maybe_await(value: Any) -> Any:
    if isinstance(value, Awaitable):
        return await value
    return value


# --- the recording router ---------------------------------------------------------


def make_interrupt_router(
    store: AnyStore, ttl_seconds: float | None = None, *, tenant: str | None = None
) -> GraphCallable:
    """Return a path function for ``add_conditional_edges`` that records each decision.

    It returns :func:`~symfonic_store.interrupt_condition` of the state, and in one
    transaction: mints a marker the store has not seen yet (its requester: the run's
    actor, :func:`~.actor.actor_of`), records the marker's
    expiry (``detected_by: router``, once per interrupt) when the marker is stale, and
    appends ``route.decided`` with the route, the marker's id, the stale reason and the
    state's ``run_id``. ``ttl_seconds`` defaults to the store's TTL. ``tenant``: the
    mint's tenant when the config names none (SPEC §15, :func:`~.actor.tenant_of`).
    """
    _check_store(store, "record_router_decision", "make_interrupt_router")
    ttl_seconds = validation.ttl(ttl_seconds)

    def ttl() -> float | None:
        return ttl_seconds if ttl_seconds is not None else store.ttl_seconds

    def route(state: dict[str, Any], config: RunnableConfig) -> str:
        _require_sync(store, "make_interrupt_router")
        decided = interrupt_condition(state, ttl())
        with _in_step(store, config):
            cast("InterruptStore", store).record_router_decision(
                _thread_id(config), state, decided, ttl_seconds=ttl(),
                tenant=tenant_of(config, tenant), actor=actor_of(config).name,
            )
        return decided

    async def aroute(state: dict[str, Any], config: RunnableConfig) -> str:
        decided = interrupt_condition(state, ttl())
        with _in_step(store, config):
            await _maybe_await(
                store.record_router_decision(
                    _thread_id(config), state, decided, ttl_seconds=ttl(),
                    tenant=tenant_of(config, tenant), actor=actor_of(config).name,
                )
            )
        return decided

    return GraphCallable(route, afunc=aroute, name="interrupt_router")


# --- raising an interrupt from a tool ---------------------------------------------


class InterruptRequest:
    """What a tool returns to ask a person something instead of answering itself.

    Return it from a tool run by :func:`create_tools_node`; the tools node turns it into
    an ``_interrupt_pending`` marker bound to the tool call, and the person's answer
    becomes that tool call's one ``ToolMessage``.
    """

    __slots__ = ("interrupt_id", "name", "payload")

    def __init__(self, name: str, payload: dict[str, Any], interrupt_id: str | None = None):
        self.name = name
        self.payload = payload
        self.interrupt_id = interrupt_id or new_interrupt_id()

    def __repr__(self) -> str:
        return f"InterruptRequest(name={self.name!r}, interrupt_id={self.interrupt_id!r})"


def request_interrupt(
    name: str, payload: dict[str, Any], *, interrupt_id: str | None = None
) -> InterruptRequest:
    """Ask a person from inside a tool body: ``return request_interrupt("approval", {...})``."""
    return InterruptRequest(name, payload, interrupt_id)


def _tool_result_content(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, default=str)


def create_tools_node(tools: Sequence[BaseTool]) -> GraphCallable:
    """Return a node that runs the last AI message's tool calls and understands interrupts.

    LangGraph's prebuilt ``ToolNode`` insists that every tool call is answered by a
    ``ToolMessage`` in the same step, so a tool cannot pause for a person there. This
    node answers ordinary calls with a ``ToolMessage`` and, for a call whose tool
    returned an :class:`InterruptRequest`, sets ``_interrupt_pending`` (bound to that
    tool call, stamped with the state's ``run_id``) and leaves the call open until the
    interrupt node answers it. At most one call per step may raise an interrupt.
    """
    by_name = {t.name: t for t in tools}

    def calls_of(state: dict[str, Any]) -> list[dict[str, Any]]:
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage):
            return []
        return [dict(c) for c in last.tool_calls]

    def tool_for(call: dict[str, Any]) -> BaseTool:
        tool = by_name.get(call["name"])
        if tool is None:
            raise InvalidInputError(
                "tool call", f"the model called unknown tool {call['name']!r}; known: {sorted(by_name)}"
            )
        return tool

    def collect(
        state: dict[str, Any], results: list[tuple[dict[str, Any], Any]]
    ) -> dict[str, Any]:
        messages: list[ToolMessage] = []
        marker: dict[str, Any] | None = None
        for call, result in results:
            if isinstance(result, InterruptRequest):
                if marker is not None:
                    raise InvalidInputError(
                        "tool calls",
                        "two tools raised an interrupt in one step; a thread has one pending "
                        "interrupt at a time",
                    )
                marker = build_interrupt_marker(
                    name=result.name,
                    interrupt_id=result.interrupt_id,
                    payload=result.payload,
                    tool_call_id=call["id"],
                    run_id=state.get("run_id"),
                )[PENDING_KEY]
            else:
                messages.append(
                    ToolMessage(
                        content=_tool_result_content(result),
                        tool_call_id=call["id"],
                        name=call["name"],
                    )
                )
        update: dict[str, Any] = {"messages": messages}
        if marker is not None:
            update[PENDING_KEY] = marker
        return update

    def run(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        results = [(c, tool_for(c).invoke(c["args"], config)) for c in calls_of(state)]
        return collect(state, results)

    async def arun(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        results = [(c, await tool_for(c).ainvoke(c["args"], config)) for c in calls_of(state)]
        return collect(state, results)

    return GraphCallable(run, afunc=arun, name="tools")


__all__ = [
    "InterruptRequest",
    "InterruptState",
    "create_interrupt_node",
    "create_tools_node",
    "make_interrupt_router",
    "request_interrupt",
]
