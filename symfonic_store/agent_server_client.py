"""Answering and waking graphs served by LangGraph's Agent Server, through ``langgraph-sdk``.

``symfonic-store serve --langgraph-url URL`` and ``sweep --langgraph-url URL`` (SPEC §13)
reach graphs the store cannot import: they run in the Agent Server's process, recorded by
the store's checkpointer there (:mod:`symfonic_store.agent_server`). :class:`ServedGraphs`
does for them what an :class:`~symfonic_store.InterruptGateway` does for a graph in
process, with the same two-phase admission (SPEC §8):

1. the answer *claims* the interrupt in the store (a racing answer is refused, recorded);
2. ``runs.wait`` on the thread with the mint's ``assistant_id`` and
   ``command={"resume": {interrupt_id: value}}``: the server's checkpointer turns the claim
   into ``interrupt.resumed`` in the step that consumed it, with the claim's actor (the
   inbox principal) and the run's server user as ``data["server_user"]``;
3. from the run's outcome: still waiting on the interrupt, or the run failed -> the claim is
   released (``not_taken``) and the interrupt stays open; taken -> confirmed (a no-op when
   the server's checkpointer confirmed it already).

A server that cannot be reached before the claim is an :class:`AgentServerError` (HTTP
503), one that refuses the service's key a 502, and nothing is written. One that fails during the run leaves no answer lost: when the
request never reached it the claim is released; when its outcome is unknown (a timeout, a
dropped connection) the claim is kept and the next sweep settles it from the thread's state
(:meth:`ServedGraphs.settle_claim`), or records it unknown for an operator.

As an ``on_expired`` callback (:meth:`ServedGraphs.waker`), it resumes each expired
interrupt with §8's expiry answer and records no resume; a thread the server does not hold
is :data:`~symfonic_store.NOT_HELD` (owed to another graph); an unreachable server raises,
and the sweep leaves the wake-up owed.

The API key is ``--langgraph-api-key-file``'s, else ``LANGGRAPH_API_KEY`` (the SDK's own
variable); it is sent as the SDK sends it (``x-api-key``) and never shown.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import native
from .errors import AnswerNotTakenError, InvalidInputError, SymfonicStoreError
from .services.sweep import NOT_HELD
from .validation import answer_ids

if TYPE_CHECKING:
    from .store import InterruptStore

API_KEY_ENV = "LANGGRAPH_API_KEY"
ANSWER_ID_KEY = "symfonic_answer_id"
"""As :data:`symfonic_store.langgraph.answer_id.ANSWER_ID_KEY` (not imported: this module
loads without LangGraph)."""
TENANT_KEY = "tenant"
"""As :data:`symfonic_store.langgraph.actor.TENANT_KEY` (the same reason)."""
_ANSWER_NAMESPACE = uuid.UUID("5b0f2f3c-6a52-4f5e-9b7c-1c7f0c2a9e41")
TIMEOUT = 300.0
"""Seconds a run may take before its outcome is called unknown."""


class AgentServerError(SymfonicStoreError):
    """The Agent Server could not be reached, or failed a call (the message says which).

    ``status``: the HTTP status the approval service answers with (503 unreachable, 502
    the server failed); ``outcome_unknown``: the answer's run may have happened (the claim
    is kept; the next sweep settles it).
    """

    def __init__(self, message: str, *, status: int = 503, outcome_unknown: bool = False) -> None:
        self.status = status
        self.outcome_unknown = outcome_unknown
        super().__init__(message)


def answer_id(thread_id: str, interrupt_id: str) -> str:
    """The stable answer id of SPEC §12 (the gateway's own, computed alike)."""
    return uuid.uuid5(_ANSWER_NAMESPACE, f"{thread_id}\x1f{interrupt_id}").hex


def read_api_key(path: Path | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The API key from ``path`` (stripped), else ``$LANGGRAPH_API_KEY``, else None.

    Raises:
        InvalidInputError: the file cannot be read or is empty (the key is never shown).
    """
    if path is not None:
        try:
            key = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise InvalidInputError("--langgraph-api-key-file", f"cannot be read ({reason})") from None
        if not key:
            raise InvalidInputError("--langgraph-api-key-file", "is empty")
        return key
    env = os.environ if environ is None else environ
    return env.get(API_KEY_ENV, "").strip() or None


def _is_served(record: Mapping[str, Any]) -> bool:
    return bool(record.get("assistant_id") or record.get("graph_id"))


class ServedGraphs:
    """Answers and wake-ups of the graphs one Agent Server serves (see the module doc).

    Args:
        store: the store the server's checkpointer records into (an
            :class:`~symfonic_store.InterruptStore`).
        url: the Agent Server's URL (``http://127.0.0.1:2024``).
        api_key: sent as ``x-api-key``; None: no key.
        client: a ``langgraph-sdk`` sync client to use instead (tests).
    """

    graph_name = None
    """The sweep hands this waker every owed wake-up; it answers NOT_HELD for the threads
    its server does not hold."""

    def __init__(
        self,
        store: InterruptStore,
        url: str,
        *,
        api_key: str | None = None,
        client: Any = None,
        timeout: float = TIMEOUT,
    ) -> None:
        text = str(url or "").strip().rstrip("/")
        if not text.startswith(("http://", "https://")):
            raise InvalidInputError("--langgraph-url", f"must be an http:// or https:// URL, got {text!r}")
        self.store = store
        self.url = text
        if client is None:
            try:
                from langgraph_sdk import get_sync_client
            except ImportError:
                raise InvalidInputError(
                    "--langgraph-url",
                    "needs langgraph-sdk: pip install '.[agent-server]' in a checkout of symfonic-store",
                ) from None
            client = get_sync_client(url=text, api_key=api_key, timeout=timeout)
        self.client = client

    # --- talking to the server ------------------------------------------------------

    def _failed(self, exc: Exception, doing: str, *, sent: bool) -> AgentServerError:
        """What a failed SDK call says: unreachable (503) or failed (502); never the key."""
        import httpx

        status_code = getattr(exc, "status_code", None) or getattr(
            getattr(exc, "response", None), "status_code", None
        )
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return AgentServerError(
                f"the Agent Server at {self.url} is unreachable ({type(exc).__name__}) while "
                f"{doing}; check --langgraph-url and that the server runs",
                status=503,
            )
        if isinstance(exc, httpx.TransportError):
            return AgentServerError(
                f"the Agent Server at {self.url} did not answer while {doing} "
                f"({type(exc).__name__}); the run may have happened",
                status=503,
                outcome_unknown=sent,
            )
        if status_code in (401, 403):
            return AgentServerError(
                f"the Agent Server at {self.url} refused the service's credentials "
                f"(HTTP {status_code}) while {doing}; check --langgraph-api-key-file or "
                f"${API_KEY_ENV}",
                status=502,
            )
        shown = f"HTTP {status_code}" if status_code else type(exc).__name__
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return AgentServerError(
            f"the Agent Server at {self.url} failed while {doing} ({shown}"
            + (f": {detail}" if detail else "")
            + ")",
            status=502,
        )

    def check(self) -> None:
        """Raise :class:`AgentServerError` unless the server answers and takes the
        service's key (an authenticated read: one assistant)."""
        try:
            self.client.assistants.search(limit=1)
        except Exception as exc:
            raise self._failed(exc, "checking it answers", sent=False) from None

    def _waiting(self, thread_id: str) -> list[str] | None:
        """The interrupt ids the thread waits on, or None when the server has no such thread."""
        try:
            state = self.client.threads.get_state(thread_id)
        except Exception as exc:
            status = getattr(exc, "status_code", None) or getattr(
                getattr(exc, "response", None), "status_code", None
            )
            if status in (404, 422):  # no such thread there (422: not even a server's id)
                return None
            raise self._failed(exc, f"reading thread {thread_id!r}", sent=False) from None
        ids = [str(i.get("id")) for i in state.get("interrupts") or () if isinstance(i, Mapping)]
        for task in state.get("tasks") or ():
            for i in task.get("interrupts") or ():
                if isinstance(i, Mapping) and i.get("id") is not None:
                    ids.append(str(i["id"]))
        return ids

    def _resume(self, thread_id: str, interrupt_id: str, assistant: str, value: Any,
                configurable: dict[str, Any]) -> Any:
        try:
            return self.client.runs.wait(
                thread_id,
                assistant,
                command={"resume": {interrupt_id: value}},
                config={"configurable": configurable},
                raise_error=False,
            )
        except Exception as exc:
            raise self._failed(exc, f"resuming thread {thread_id!r}", sent=True) from None

    @staticmethod
    def _assistant(record: Mapping[str, Any]) -> str:
        return str(record.get("assistant_id") or record.get("graph_id"))

    # --- answers ---------------------------------------------------------------------

    def serves(self, record: Mapping[str, Any] | None) -> bool:
        """Is this mint one of a served graph (it recorded ``assistant_id``/``graph_id``)?"""
        return record is not None and _is_served(record)

    def answer(
        self,
        thread_id: str,
        interrupt_id: str,
        value: Any,
        *,
        actor: str,
        authenticated_by: str | None = None,
        approvers: tuple[str, ...] = (),
    ) -> Any:
        """Admit ``value`` exactly once and resume the served graph with it; returns the
        run's result (the thread's values).

        Raises:
            The store's refusals (as :meth:`InterruptGateway.answer`, recorded);
            AnswerNotTakenError: the run failed on the answer or left the interrupt waiting
                (recorded ``not_taken``; it stays open);
            AgentServerError: the server is unreachable (nothing written before the claim;
                a claim whose run never started is released) or failed; with
                ``outcome_unknown`` the claim is kept for the sweep to settle.
        """
        t, i, a = answer_ids(thread_id, interrupt_id, actor)
        record = self.store.interrupt_record(t, i) or {}
        if not _is_served(record):
            raise InvalidInputError(
                "interrupt_id", f"interrupt {i!r} on thread {t!r} was not minted by a served graph"
            )
        # Unreachable, the service's key refused, or a thread the server does not hold:
        # said now, before anything is written.
        if self._waiting(t) is None:
            raise AgentServerError(
                f"the Agent Server at {self.url} has no thread {t!r}: interrupt {i!r} was "
                "minted by a graph another server runs; nothing was written",
                status=409,
            )
        self.store.claim(t, i, value, actor=a, authenticated_by=authenticated_by, approvers=approvers)
        configurable = {ANSWER_ID_KEY: answer_id(t, i), "actor": a}
        tenant = self.store.interrupt_tenants([(t, i)]).get((t, i))
        if tenant is not None:  # what the run mints next belongs where this interrupt does
            configurable[TENANT_KEY] = tenant
        try:
            result = self._resume(t, i, self._assistant(record), value, configurable)
        except AgentServerError as exc:
            if not exc.outcome_unknown:
                self.store.release(t, i, error=str(exc)[:1000])
            raise
        error = result.get("__error__") if isinstance(result, Mapping) else None
        waiting = self._waiting(t) or []
        if error is not None or i in waiting:
            why = (
                f"{error.get('error')}: {error.get('message')}"
                if isinstance(error, Mapping)
                else "the graph left the interrupt pending"
            )
            self.store.release(t, i, error=why[:1000])
            raise AnswerNotTakenError(
                f"the served graph did not take the answer to interrupt {i!r} on thread {t!r} "
                f"({why}); it stays open and the attempt is recorded",
                thread_id=t, interrupt_id=i, error=why,
            )
        self.store.confirm(t, i)  # a no-op when the server's checkpointer confirmed it
        return result

    # --- expiry ----------------------------------------------------------------------

    def waker(self) -> ServedGraphs:
        """An ``on_expired`` callback for ``store.sweep`` (this object; see the module doc)."""
        return self

    def __call__(self, thread_id: str, interrupt_id: str, reason: str) -> Any:
        waiting = self._waiting(thread_id)
        if waiting is None:
            return NOT_HELD
        if interrupt_id not in waiting:
            return False
        record = self.store.interrupt_record(thread_id, interrupt_id) or {}
        if not _is_served(record):
            return NOT_HELD  # the server holds the thread, but this mint is no served graph's
        if record.get("breakpoint"):
            return False  # an expired breakpoint runs nothing
        answer = native.expiry_answer(record.get("payload"), reason)
        configurable = {ANSWER_ID_KEY: answer_id(thread_id, interrupt_id)}
        self._resume(thread_id, interrupt_id, self._assistant(record), answer, configurable)
        return True

    def settle_claim(self, thread_id: str, interrupt_id: str) -> str | None:
        """A lapsed claim whose run the server's thread shows taken: confirmed (``"resumed"``);
        else None (the sweep records the outcome unknown)."""
        record = self.store.interrupt_record(thread_id, interrupt_id) or {}
        if not _is_served(record):
            return None
        waiting = self._waiting(thread_id)
        if waiting is None or interrupt_id in waiting:
            return None
        return "resumed" if self.store.confirm(thread_id, interrupt_id) else None


__all__ = ["API_KEY_ENV", "AgentServerError", "ServedGraphs", "answer_id", "read_api_key"]
