"""``InterruptGateway``: record and gate any LangGraph graph's interrupts, unchanged.

The gateway wraps a compiled graph. After every call it looks at what the thread is
left waiting on (``graph.get_state``: LangGraph's own ``Interrupt`` objects, and static
breakpoints) and records it in the store: a mint for each interrupt the store has not
seen, and ``superseded`` for each open one LangGraph stopped waiting on. ``answer``
admits an answer exactly once, decided by the database in two phases: a *claim*
commits before the graph runs; once LangGraph consumed the answer the claim becomes
``interrupt.resumed``; when the graph raised, or left the interrupt pending, it becomes
``interrupt.resume_rejected`` (``not_taken``) and the interrupt reopens for the next
answer.

The logic is written once, as plans of steps (a graph call, a store call), driven by
the store's one runner (:mod:`symfonic_store.store.runner`) with the gateway's own step
dispatch, sync or async.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph.types import Command

from .. import native
from ..compat import RESUME as _RESUME_CHANNEL
from ..errors import AnswerNotTakenError, DatabaseError, InvalidInputError
from ..services.sweep import NOT_HELD
from ..store.runner import adrive, drive, is_async_store
from ..tracing import span
from ..validation import answer_ids, config_thread_id
from .actor import TENANT_KEY, actor_of, tenant_of
from .answer_id import ANSWER_ID_KEY, answer_id
from .failures import failed_while_running, store_error, store_errors
from .recording import saved_answers
from .waiting import Stops, waiting_on
from .waiting import marker_interrupt as _marker_interrupt
from .wakers import holds

ANSWER_SPAN = "symfonic.gateway.answer"
"""The span of a gateway answer (:mod:`symfonic_store.tracing`): ids, never the answer."""

if TYPE_CHECKING:
    from ..store import AsyncInterruptStore, InterruptStore



@dataclass(frozen=True, slots=True)
class _Graph:
    """A graph step: ``method`` of the graph (or of its checkpointer) with arguments."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Store:
    """A store step: ``method`` of the store with arguments."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


_Plan = Generator["_Graph | _Store", Any, Any]


def _failed(exc: Exception, step: _Graph | _Store) -> BaseException:
    """What a failed step throws back into its plan: a store failure told apart (SPEC §12)."""
    return store_error(exc, step=step.method)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:500]}" if text else type(exc).__name__


def _config(thread_id: str, actor: str | None, config: Mapping[str, Any] | None) -> dict[str, Any]:
    base = dict(config or {})
    configurable = dict(base.get("configurable") or {})
    configurable["thread_id"] = thread_id
    if actor is not None:
        configurable["actor"] = actor
    base["configurable"] = configurable
    return base


def _thread_of(config: Mapping[str, Any] | None) -> str:
    return config_thread_id(
        config,
        "the gateway records per thread; invoke with "
        'config={"configurable": {"thread_id": ...}}',
    )


def _actor_of(config: Mapping[str, Any] | None) -> str | None:
    return actor_of(config).name


class InterruptGateway:
    """Record and gate every interrupt of ``graph`` in ``store`` (SPEC §8).

    Args:
        graph: a compiled LangGraph graph with a checkpointer.
        store: an :class:`~symfonic_store.InterruptStore` (every method below; from the
            async ones its calls run off the event loop) or an
            :class:`~symfonic_store.AsyncInterruptStore` (the async methods).
        on_expiry: ``on_expiry(interrupt) -> answer``: the answer :meth:`waker` resumes an
            expired native interrupt with (``interrupt`` is its open-interrupt dict); by
            default a ``reject`` decision for HITL middleware, ``ignore`` for Agent
            Inbox, else ``{"expired": true, "reason": ...}``.
        tenant: the tenant of the interrupts it mints when the call's config names none
            (``configurable["tenant"]`` wins; SPEC §15).
    """

    def __init__(
        self,
        graph: Any,
        store: InterruptStore | AsyncInterruptStore,
        *,
        on_expiry: Callable[[dict[str, Any]], Any] | None = None,
        tenant: str | None = None,
    ) -> None:
        if not (callable(getattr(graph, "invoke", None)) and callable(getattr(graph, "get_state", None))):
            raise InvalidInputError(
                "graph", f"must be a compiled LangGraph graph, got {type(graph).__name__}"
            )
        if hasattr(graph, "checkpointer") and graph.checkpointer is None:
            raise InvalidInputError(
                "graph", "has no checkpointer: compile it with checkpointer=... to pause and resume"
            )
        if not callable(getattr(store, "claim", None)):
            raise InvalidInputError(
                "store", f"must be an InterruptStore or AsyncInterruptStore, got {type(store).__name__}"
            )
        self.graph = graph
        self.store = store
        self.on_expiry = on_expiry
        self.tenant = tenant
        from .checkpointer import GRAPH_KEY, is_own

        self._async_store = is_async_store(store)
        self._stops = Stops.of(graph)
        # With the store's own checkpointer the mints commit inside the graph's steps:
        # the config tells them the graph's name, which the gateway would record after.
        owned = is_own(store, getattr(graph, "checkpointer", None))
        self._graph_tag = {GRAPH_KEY: self.name} if owned else {}

    @property
    def name(self) -> str:
        """The graph's name, recorded on each mint (the service matches ``--graph`` by it)."""
        return str(getattr(self.graph, "name", None) or "LangGraph")

    def _tag(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        """``config`` naming the graph for the store's own checkpointer (see __init__)."""
        cfg = dict(config or {})
        if self._graph_tag:
            cfg["configurable"] = {**(cfg.get("configurable") or {}), **self._graph_tag}
            tenant = tenant_of(cfg, self.tenant)
            if tenant is not None:  # the steps' mints: the config's tenant, else the default
                cfg["configurable"][TENANT_KEY] = tenant
        return cfg

    # --- plans ---------------------------------------------------------------------

    def _waiting(self, thread_id: str, stops: Stops | None = None) -> _Plan:
        """The thread's state and what it waits on (:func:`.waiting.waiting_on`), its
        breakpoint marked declared by ``stops`` (the graph's by default)."""
        stops = stops or self._stops
        snapshot = yield _Graph("get_state", ({"configurable": {"thread_id": thread_id}},))
        waiting = waiting_on(snapshot, stops)
        parent = getattr(snapshot, "parent_config", None)
        if stops.after and parent and any(w["breakpoint"] and not w["declared"] for w in waiting):
            # Stopped after a node? The nodes whose step wrote this checkpoint are the
            # ones the checkpoint before it was about to run.
            before = yield _Graph("get_state", (parent,))
            waiting = waiting_on(snapshot, stops, getattr(before, "next", ()) or ())
        return snapshot, waiting

    def _record(self, config: dict[str, Any], stops: Stops | None = None) -> _Plan:
        """After a call: mint what the thread waits on, close what it stopped waiting on."""
        thread_id = _thread_of(config)
        _, waiting = yield from self._waiting(thread_id, stops)
        yield _Store(
            "record_waiting",
            (thread_id, waiting),
            {"actor": _actor_of(config), "graph": self.name, "tenant": tenant_of(config, self.tenant)},
        )

    def _run(self, input: Any, config: dict[str, Any], kwargs: Mapping[str, Any]) -> _Plan:
        thread_id = _thread_of(config)
        stops = Stops.of(self.graph, kwargs)
        if input is None:
            yield from self._guard_breakpoint(thread_id, config, stops)
        result = yield _Graph("invoke", (input, config), kwargs)
        yield from self._record(config, stops)
        return result

    def _guard_breakpoint(self, thread_id: str, config: dict[str, Any], stops: Stops) -> _Plan:
        """``invoke(None)`` continues a run: at a breakpoint, only its approval may do that.

        LangGraph would run the next node whatever the breakpoint's answer was; through
        the gateway, a refused or expired breakpoint stays closed (the attempt is
        recorded when the call names its actor), and an open one is continued by
        answering it.
        """
        _, waiting = yield from self._waiting(thread_id, stops)
        stop = next((w for w in waiting if w["breakpoint"]), None)
        if stop is None:
            return
        interrupt_id = stop["interrupt_id"]
        record = yield _Store("interrupt_record", (thread_id, interrupt_id))
        if record is None and not stop["declared"]:
            return  # a pause between two nodes that no breakpoint declared: nothing to guard
        actor = _actor_of(config)
        if record is not None and actor is not None:
            # Refused (recorded) unless open and unanswered: then the claim below stands
            # in for nothing -- release it at once, the caller must answer instead.
            yield _Store("claim", (thread_id, interrupt_id, None), {"actor": actor})
            yield _Store(
                "release",
                (thread_id, interrupt_id),
                {"error": "invoke(None) at a breakpoint: answer it with {\"approved\": true}"},
            )
        raise InvalidInputError(
            "input",
            f"thread {thread_id!r} is paused at breakpoint {interrupt_id!r} before "
            f"{', '.join(stop['value']['next'])}: continue it with "
            f"gate.answer({thread_id!r}, {interrupt_id!r}, {{\"approved\": True}}, actor=...)",
        )

    def _answer(
        self,
        thread_id: str,
        interrupt_id: str,
        value: Any,
        actor: str,
        config: Mapping[str, Any] | None,
        authenticated_by: str | None = None,
        approvers: tuple[str, ...] = (),
    ) -> _Plan:
        base = _config(thread_id, actor, config)
        if base["configurable"].get(TENANT_KEY) is None:
            # What the run mints next belongs where the answered interrupt does: its
            # tenant, before the gateway's default (a config naming one still wins).
            found = yield _Store("interrupt_tenants", ([(thread_id, interrupt_id)],))
            if found.get((thread_id, interrupt_id)) is not None:
                base["configurable"][TENANT_KEY] = found[(thread_id, interrupt_id)]
        cfg = self._tag(base)
        cfg["configurable"][ANSWER_ID_KEY] = answer_id(thread_id, interrupt_id)
        who = {"actor": actor, "authenticated_by": authenticated_by, "approvers": approvers}
        snapshot, waiting = yield from self._waiting(thread_id)
        marker = _marker_interrupt(waiting, interrupt_id)
        if marker is not None:
            # The seed node's own interrupt: the store's front door (N2), then the graph,
            # in the map form under LangGraph's id (other interrupts may be open too).
            command = yield _Store("resume", (thread_id, interrupt_id, value), who)
            try:
                result = yield _Graph("invoke", (Command(resume={marker["interrupt_id"]: command.resume}), cfg))
            except DatabaseError as exc:  # the resume is committed: it is never "nothing"
                raise failed_while_running(thread_id, interrupt_id, exc, resumed=True) from exc
            yield from self._after_running(thread_id, interrupt_id, self._record(cfg), resumed=True)
            return result
        # What LangGraph waits on right now, recorded first: an id it is not waiting on
        # is then unknown, resolved or superseded in the store, and refused below.
        yield _Store(
            "record_waiting", (thread_id, waiting),
            {"actor": None, "graph": self.name, "tenant": tenant_of(cfg, self.tenant)},
        )
        yield _Store("claim", (thread_id, interrupt_id, value), who)
        target = next((w for w in waiting if w["interrupt_id"] == interrupt_id), None)
        if target is None:  # pragma: no cover - claim refuses what nobody waits on
            yield _Store("release", (thread_id, interrupt_id), {"error": "LangGraph is not waiting on it"})
            raise AnswerNotTakenError(
                f"interrupt {interrupt_id!r} on thread {thread_id!r}: LangGraph is not waiting on it",
                thread_id=thread_id, interrupt_id=interrupt_id, error="not waiting",
            )
        if target["breakpoint"]:
            return (yield from self._answer_breakpoint(thread_id, interrupt_id, value, cfg, snapshot))
        command = Command(resume={interrupt_id: value})
        # The answers LangGraph holds for the task now: one past them, after a failure,
        # is this answer, saved beside the error; none past them, it was refused unsaved.
        saved = yield _Graph("saved_answers", (snapshot.config, target["task_id"]))
        try:
            result = yield _Graph("invoke", (command, cfg))
        except DatabaseError as exc:
            raise failed_while_running(thread_id, interrupt_id, exc) from exc
        except Exception as exc:
            yield from self._after_running(
                thread_id, interrupt_id, self._not_taken(thread_id, interrupt_id, target, _describe(exc), saved)
            )
            raise AnswerNotTakenError(
                f"the graph did not take the answer to interrupt {interrupt_id!r} on thread "
                f"{thread_id!r} ({_describe(exc)}); it stays open and the attempt is recorded",
                thread_id=thread_id, interrupt_id=interrupt_id, error=_describe(exc),
            ) from exc
        yield from self._after_running(
            thread_id, interrupt_id, self._settle_answer(thread_id, interrupt_id, target, saved, actor, cfg)
        )
        return result

    def _after_running(self, thread_id: str, interrupt_id: str, steps: _Plan, *, resumed: bool = False) -> _Plan:
        """``steps``, which follow the graph's run of an admitted answer: the node may have
        acted and its step may have committed, so a database failure there leaves the
        answer's outcome unknown -- never "nothing was written" (SPEC §12)."""
        try:
            return (yield from steps)
        except DatabaseError as exc:
            raise failed_while_running(thread_id, interrupt_id, exc, resumed=resumed) from exc

    def _settle_answer(
        self, thread_id: str, interrupt_id: str, target: dict[str, Any], saved: int, actor: str,
        cfg: dict[str, Any],
    ) -> _Plan:
        """After the graph ran: taken (the claim becomes the answer) or left pending."""
        _, waiting = yield from self._waiting(thread_id)
        if any(w["interrupt_id"] == interrupt_id for w in waiting):
            error = "the graph left the interrupt pending"
            yield from self._not_taken(thread_id, interrupt_id, target, error, saved)
            raise AnswerNotTakenError(
                f"the graph did not take the answer to interrupt {interrupt_id!r} on thread "
                f"{thread_id!r} ({error}); it stays open and the attempt is recorded",
                thread_id=thread_id, interrupt_id=interrupt_id, error=error,
            )
        yield _Store("confirm", (thread_id, interrupt_id))
        yield _Store(
            "record_waiting", (thread_id, waiting),
            {"actor": actor, "graph": self.name, "tenant": tenant_of(cfg, self.tenant)},
        )

    def _answer_breakpoint(
        self, thread_id: str, interrupt_id: str, value: Any, cfg: dict[str, Any], snapshot: Any
    ) -> _Plan:
        approved = isinstance(value, Mapping) and value.get("approved") is True
        if not approved:
            # LangGraph ignores a resume value at a breakpoint and would run the node:
            # a refusal runs nothing, and the thread stays paused before the node.
            yield _Store("confirm", (thread_id, interrupt_id), {"decision": "reject"})
            return dict(getattr(snapshot, "values", {}) or {})
        try:
            result = yield _Graph("invoke", (None, cfg))
        except DatabaseError as exc:
            raise failed_while_running(thread_id, interrupt_id, exc) from exc
        except Exception as exc:
            yield _Store("release", (thread_id, interrupt_id), {"error": _describe(exc)})
            raise AnswerNotTakenError(
                f"the graph failed past breakpoint {interrupt_id!r} on thread {thread_id!r} "
                f"({_describe(exc)}); it stays open and the attempt is recorded",
                thread_id=thread_id, interrupt_id=interrupt_id, error=_describe(exc),
            ) from exc
        yield from self._after_running(thread_id, interrupt_id, self._confirm_breakpoint(thread_id, interrupt_id, cfg))
        return result

    def _confirm_breakpoint(self, thread_id: str, interrupt_id: str, cfg: dict[str, Any]) -> _Plan:
        yield _Store("confirm", (thread_id, interrupt_id), {"decision": "approve"})
        yield from self._record(cfg)

    def _not_taken(
        self, thread_id: str, interrupt_id: str, target: dict[str, Any], error: str, saved: int
    ) -> _Plan:
        # LangGraph keeps the answer a task raised on as that task's resume write and
        # would hand it to the node again, whatever the next answer: take it back first
        # (only it: the ``saved`` answers before it stay the task's).
        after = yield _Graph("get_state", ({"configurable": {"thread_id": thread_id}},))
        task_id = next(
            (w["task_id"] for w in waiting_on(after, self._stops) if w["interrupt_id"] == interrupt_id),
            target["task_id"],
        )
        if task_id is not None:
            yield _Graph("clear_answer", (after.config, task_id, saved))
        yield _Store("release", (thread_id, interrupt_id), {"error": error})

    # --- drivers ---------------------------------------------------------------------

    def _sync_step(self, step: _Graph | _Store) -> Any:
        if isinstance(step, _Store):
            if self._async_store:
                raise TypeError(
                    "the gateway was given an AsyncInterruptStore: use ainvoke/astream/aanswer"
                )
            return getattr(self.store, step.method)(*step.args, **step.kwargs)
        if step.method == "clear_answer":
            return _clear_answer(self.graph.checkpointer, *step.args)
        if step.method == "saved_answers":
            return _saved_answers(self.graph.checkpointer, *step.args)
        return getattr(self.graph, step.method)(*step.args, **step.kwargs)

    async def _async_step(self, step: _Graph | _Store) -> Any:
        if isinstance(step, _Store):
            method = getattr(self.store, step.method)
            if self._async_store:
                return await method(*step.args, **step.kwargs)
            return await asyncio.to_thread(method, *step.args, **step.kwargs)
        if step.method == "clear_answer":
            return await _aclear_answer(self.graph.checkpointer, *step.args)
        if step.method == "saved_answers":
            return await _asaved_answers(self.graph.checkpointer, *step.args)
        method = getattr(self.graph, "a" + step.method)
        return await method(*step.args, **step.kwargs)

    def _drive(self, plan: _Plan) -> Any:
        return drive(plan, self._sync_step, _failed)

    async def _adrive(self, plan: _Plan) -> Any:
        return await adrive(plan, self._async_step, _failed)

    # --- the graph's own entry points ----------------------------------------------

    def invoke(self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """``graph.invoke``, then record what the thread is left waiting on."""
        return self._drive(self._run(input, self._tag(config), kwargs))

    async def ainvoke(self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """``graph.ainvoke``, then record what the thread is left waiting on."""
        return await self._adrive(self._run(input, self._tag(config), kwargs))

    def stream(self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Iterator[Any]:
        """``graph.stream``; once the stream ends, record what the thread waits on."""
        cfg = self._tag(config)
        _thread_of(cfg)
        with store_errors("stream"):
            yield from self.graph.stream(input, cfg, **kwargs)
        self._drive(self._record(cfg, Stops.of(self.graph, kwargs)))

    async def astream(
        self, input: Any, config: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """``graph.astream``; once the stream ends, record what the thread waits on."""
        cfg = self._tag(config)
        _thread_of(cfg)
        with store_errors("stream"):
            async for chunk in self.graph.astream(input, cfg, **kwargs):
                yield chunk
        await self._adrive(self._record(cfg, Stops.of(self.graph, kwargs)))

    # --- answers ---------------------------------------------------------------------

    # Deliberately repeated: aanswer() has this public signature; both share _answer.
    def answer(
        self,
        thread_id: str,
        interrupt_id: str,
        value: Any,
        *,
        actor: str,
        config: Mapping[str, Any] | None = None,
        authenticated_by: str | None = None,
        approvers: tuple[str, ...] = (),
    ) -> Any:
        """Admit ``value`` for the interrupt exactly once, resume the graph, return its result.

        LangGraph interrupts are resumed in the map form
        (``Command(resume={interrupt_id: value})``), so several open interrupts of a
        thread are each answerable; a breakpoint continues (``invoke(None)``) only on
        ``{"approved": true}``; the seed marker's interrupt goes through
        ``store.resume`` (N2). ``actor`` is recorded as given: the caller vouches for it
        (``authenticated_by``: how a service established it, e.g. ``service:jwt``;
        ``approvers``: the principals whose votes completed a quorum, SPEC §15).

        Raises:
            UnknownInterruptError, InterruptAlreadyResolvedError, InterruptExpiredError,
                ResumeNotAllowedError: refused and recorded; the graph does not run.
            InterruptInProgressError: another answer holds the claim (recorded).
            InterruptOutcomeUnknownError: an earlier answer's outcome is unknown (recorded).
            AnswerNotTakenError: the graph raised on the answer or left the interrupt
                pending; recorded as ``not_taken``; the interrupt stays open.
            InvalidInputError: the store's decisions function refused the answer
                (nothing recorded; the graph does not run).
            DatabaseError: the database failed; once the answer was admitted (claimed,
                or resumed for the seed marker) ``outcome_unknown`` is True and the claim
                is kept: the node may have acted.
        """
        t, i, a = answer_ids(thread_id, interrupt_id, actor)
        with span(ANSWER_SPAN, **{"symfonic.thread_id": t, "symfonic.interrupt_id": i, "symfonic.graph": self.name}):
            return self._drive(self._answer(t, i, value, a, config, authenticated_by, tuple(approvers)))

    # Deliberately repeated: answer()'s public signature; both share _answer.
    async def aanswer(
        self,
        thread_id: str,
        interrupt_id: str,
        value: Any,
        *,
        actor: str,
        config: Mapping[str, Any] | None = None,
        authenticated_by: str | None = None,
        approvers: tuple[str, ...] = (),
    ) -> Any:
        """As :meth:`answer`, through the graph's async API (``ainvoke``, ``aget_state``)."""
        t, i, a = answer_ids(thread_id, interrupt_id, actor)
        with span(ANSWER_SPAN, **{"symfonic.thread_id": t, "symfonic.interrupt_id": i, "symfonic.graph": self.name}):
            return await self._adrive(self._answer(t, i, value, a, config, authenticated_by, tuple(approvers)))

    # --- expiry ----------------------------------------------------------------------

    def _wake(self, thread_id: str, interrupt_id: str, reason: str) -> _Plan:
        snapshot = yield _Graph("get_state", ({"configurable": {"thread_id": thread_id}},))
        if not holds(snapshot):
            return NOT_HELD  # another graph's thread: the wake-up stays owed to it
        waiting = waiting_on(snapshot, self._stops)
        cfg = self._tag(_config(thread_id, None, None))
        cfg["configurable"][ANSWER_ID_KEY] = answer_id(thread_id, interrupt_id)
        marker = _marker_interrupt(waiting, interrupt_id)
        if marker is not None:
            from ..protocol import expired_resume_value

            wake: Command[Any] = Command(resume={marker["interrupt_id"]: expired_resume_value(reason)})
            yield _Graph("invoke", (wake, cfg))
            yield from self._record(cfg)  # where the woken graph paused next
            return True
        target = next((w for w in waiting if w["interrupt_id"] == interrupt_id), None)
        if target is None:
            return False
        if target["breakpoint"]:
            return False  # an expired breakpoint runs nothing: the thread stays paused
        record = yield _Store("interrupt_record", (thread_id, interrupt_id))
        payload = (record or {}).get("payload", target["value"])
        info = {**(record or {}), "thread_id": thread_id, "interrupt_id": interrupt_id, "reason": reason}
        answer = self.on_expiry(info) if self.on_expiry else native.expiry_answer(payload, reason)
        yield _Graph("invoke", (Command(resume={interrupt_id: answer}), cfg))
        yield from self._record(cfg)  # where the woken graph paused next
        return True

    def _settle(self, thread_id: str, interrupt_id: str) -> _Plan:
        record = yield _Store("interrupt_record", (thread_id, interrupt_id))
        if (record or {}).get("graph") not in (None, self.name):
            return None  # another graph's answer: this checkpoint cannot show it taken
        snapshot = yield _Graph("get_state", ({"configurable": {"thread_id": thread_id}},))
        if not holds(snapshot) or any(w["interrupt_id"] == interrupt_id for w in waiting_on(snapshot, self._stops)):
            # A thread this graph never saved, or not shown taken, is not "taken" (nor
            # "not taken"): the sweep records it unknown (SPEC §12).
            return None
        confirmed = yield _Store("confirm", (thread_id, interrupt_id))
        return "resumed" if confirmed else None

    def settle_claim(self, thread_id: str, interrupt_id: str) -> str | None:
        """Settle an answer whose process stopped before it settled, from the checkpoint.

        LangGraph no longer waits on the interrupt: the answer was consumed, and the
        claim becomes ``interrupt.resumed`` (``"resumed"``). It still waits: nothing is
        written here (None), and the sweep records the outcome as unknown (SPEC §12) --
        the graph may have acted before it died. The sweep calls this for claims older
        than its lease when ``on_expired`` is :meth:`waker`.
        """
        return self._drive(self._settle(thread_id, interrupt_id))  # type: ignore[no-any-return]

    async def asettle_claim(self, thread_id: str, interrupt_id: str) -> str | None:
        """As :meth:`settle_claim`, through the graph's async API."""
        return await self._adrive(self._settle(thread_id, interrupt_id))  # type: ignore[no-any-return]

    def waker(self) -> Callable[[str, str, str], Any]:
        """An ``on_expired`` callback for ``store.sweep`` that wakes each expired interrupt.

        It resumes the thread by interrupt id with the expiry answer (``on_expiry``)
        when the graph still waits on it, and records no resume: the interrupt stays
        expired. It names its graph (``graph_name``), so the sweep hands it only the
        wake-ups owed to this graph or to no named graph, and it returns
        :data:`~symfonic_store.NOT_HELD` for a thread the graph's checkpointer does not
        hold (that wake-up stays owed). It also lets the sweep settle answers whose process died
        (:meth:`settle_claim`). With an :class:`~symfonic_store.AsyncInterruptStore` it
        is a coroutine function (``await store.sweep(on_expired=gate.waker())``).
        """
        return _Waker(self)


class _Waker:
    """``gate.waker()``: wakes expired interrupts, and settles abandoned answers."""

    def __init__(self, gate: InterruptGateway) -> None:
        self.gate = gate
        self.graph_name = gate.name
        """The graph the sweep's wake-ups must be owed to (or to no named graph)."""

    def __call__(self, thread_id: str, interrupt_id: str, reason: str) -> Any:
        plan = self.gate._wake(thread_id, interrupt_id, reason)
        if self.gate._async_store:
            return self._awake(plan)
        return _woken(self.gate._drive(plan))

    async def _awake(self, plan: _Plan) -> Any:
        return _woken(await self.gate._adrive(plan))

    def settle_claim(self, thread_id: str, interrupt_id: str) -> Any:
        if self.gate._async_store:
            return self.gate.asettle_claim(thread_id, interrupt_id)
        return self.gate.settle_claim(thread_id, interrupt_id)


def _woken(outcome: Any) -> Any:
    """The waker's answer to the sweep: :data:`NOT_HELD`, or whether it woke the graph."""
    return outcome if outcome is NOT_HELD else bool(outcome)


def _resume_write(pending_writes: Any, task_id: str) -> list[Any] | None:
    for write in pending_writes or ():
        if write[0] == task_id and write[1] == _RESUME_CHANNEL:
            value = write[2]
            return list(value) if isinstance(value, list) else [value]
    return None


def _saved_answers(checkpointer: Any, config: Any, task_id: str | None) -> int:
    """How many answers LangGraph holds for the task at ``config``'s checkpoint."""
    if task_id is None:
        return 0
    return saved_answers(checkpointer.get_tuple(config), task_id)


async def _asaved_answers(checkpointer: Any, config: Any, task_id: str | None) -> int:
    if task_id is None:
        return 0
    return saved_answers(await checkpointer.aget_tuple(config), task_id)


def _clear_answer(checkpointer: Any, config: Any, task_id: str, saved: int) -> None:
    """Take back the answer a task raised on, saved past its ``saved`` earlier ones."""
    checkpoint = checkpointer.get_tuple(config)
    answers = _resume_write(getattr(checkpoint, "pending_writes", None), task_id)
    if answers and len(answers) > saved:
        checkpointer.put_writes(config, [(_RESUME_CHANNEL, answers[:saved])], task_id)


async def _aclear_answer(checkpointer: Any, config: Any, task_id: str, saved: int) -> None:
    checkpoint = await checkpointer.aget_tuple(config)
    answers = _resume_write(getattr(checkpoint, "pending_writes", None), task_id)
    if answers and len(answers) > saved:
        result = checkpointer.aput_writes(config, [(_RESUME_CHANNEL, answers[:saved])], task_id)
        if inspect.isawaitable(result):
            await result


__all__ = ["InterruptGateway", "waiting_on"]
