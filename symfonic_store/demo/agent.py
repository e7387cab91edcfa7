"""A small refund agent: a scripted chat model, its tools, and the canonical graph wiring.

The demo, the tests and the benchmarks all run this agent, so there is one wiring of
the interrupt protocol to read:

.. code-block:: text

    START ----> agent
    agent     --router--> interrupt | tools | END
    tools     --router--> interrupt | agent
    interrupt ----------> agent

The model is :class:`ScriptedChatModel`, a real ``langchain_core`` chat model whose
reply depends only on the conversation (no network, no randomness): asked for a refund
it calls ``request_refund``, which asks a person for approval instead of answering
(:func:`~symfonic_store.request_interrupt`); told the answer, it calls ``issue_refund``
when approved, or says the refund was rejected, or that the request timed out.
``issue_refund`` is the side effect an approval unlocks; it is counted in a
:class:`RefundLedger` so a test can prove it ran exactly once.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

# The public names the demo uses, deliberately the list langgraph/__init__.py exports.
from ..langgraph import (
    InterruptRequest,
    InterruptState,
    create_interrupt_node,
    create_tools_node,
    make_interrupt_router,
    request_interrupt,
)
from ..protocol import interrupt_condition

if TYPE_CHECKING:
    from ..store import AsyncInterruptStore, InterruptStore

APPROVAL = "approval_required"
"""The name of the interrupt ``request_refund`` raises."""

_ORDER = re.compile(r"order\s*(?:#|no\.?|number)?\s*([A-Za-z0-9][\w-]*)", re.IGNORECASE)
_AMOUNT = re.compile(r"\$\s*(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)\s*(?:\$|usd|dollars?)", re.IGNORECASE)
_YES = {"yes", "y", "true", "approve", "approved", "ok"}


# --- the scripted model ------------------------------------------------------------


def _money(amount: Any) -> str:
    try:
        return f"${float(amount):.2f}"
    except (TypeError, ValueError):
        return f"${amount}"


def _json_object(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        try:
            value = json.loads(content)
        except ValueError:
            return {"value": content}
        return value if isinstance(value, dict) else {"value": value}
    return {"value": content}


def _call_args(messages: Sequence[BaseMessage], tool_call_id: str) -> dict[str, Any]:
    """The arguments of the tool call a ToolMessage answers (empty when not found)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id") == tool_call_id:
                    return dict(call["args"])
    return {}


def _approved(response: dict[str, Any]) -> bool:
    if "approved" in response:
        return response["approved"] is True
    return str(response.get("value", "")).strip().lower() in _YES


def _tool_call(messages: Sequence[BaseMessage], name: str, args: dict[str, Any]) -> AIMessage:
    # The id depends only on the conversation, and is new on every turn of a thread.
    call_id = f"call_{name}_{len(messages)}"
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def _answer_request(messages: Sequence[BaseMessage], text: str) -> AIMessage:
    order = _ORDER.search(text)
    amount = _AMOUNT.search(text)
    if "refund" not in text.lower() or order is None or amount is None:
        return AIMessage(
            content="I can refund an order once a person approves it: tell me which order "
            "and how much, e.g. 'refund $420 to order 1181'."
        )
    value = float(amount.group(1) or amount.group(2))
    return _tool_call(messages, "request_refund", {"order_id": order.group(1), "amount": value})


def _answer_approval(messages: Sequence[BaseMessage], result: ToolMessage) -> AIMessage:
    response = _json_object(result.content)
    args = _call_args(messages, result.tool_call_id)
    order, amount = args.get("order_id", "?"), args.get("amount", "?")
    if response.get("expired") is True:
        return AIMessage(
            content=f"Sorry, the request timed out before anyone answered it "
            f"(reason: {response.get('reason')}): no refund was issued for order {order}."
        )
    if _approved(response):
        return _tool_call(messages, "issue_refund", {"order_id": order, "amount": amount})
    note = response.get("note") or response.get("reason")
    because = f" ({note})" if note else ""
    return AIMessage(
        content=f"The refund of {_money(amount)} for order {order} was rejected{because}: "
        "no refund was issued."
    )


def scripted_reply(messages: Sequence[BaseMessage]) -> AIMessage:
    """The scripted model's reply to a conversation: a pure function of the messages.

    - a person's request ("refund $420 to order 1181") -> a ``request_refund`` tool call;
    - the answer to the approval (the ToolMessage of ``interrupt:approval_required``):
      approved -> an ``issue_refund`` tool call; ``{"expired": true, ...}`` -> "the
      request timed out"; anything else -> "rejected";
    - the result of ``issue_refund`` -> a confirmation;
    - anything else -> a short offer of help.
    """
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage):
        return _answer_request(messages, last.text)
    if isinstance(last, ToolMessage):
        if last.name == f"interrupt:{APPROVAL}":
            return _answer_approval(messages, last)
        if last.name == "issue_refund":
            done = _json_object(last.content)
            return AIMessage(
                content=f"Done: refunded {_money(done.get('amount'))} to order "
                f"{done.get('order_id')}."
            )
        return AIMessage(content=f"The tool {last.name} answered: {last.content}")
    return AIMessage(content="How can I help? I can refund an order once a person approves it.")


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model for demos and tests: see :func:`scripted_reply`.

    It is a real ``BaseChatModel`` (callbacks, ``invoke``/``ainvoke``, streaming through
    the default fallbacks), so a graph built for it runs unchanged with a real model.
    ``bind_tools`` accepts any tools and returns the model itself: the script already
    knows its two tools.
    """

    @property
    def _llm_type(self) -> str:
        return "symfonic-scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=scripted_reply(messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # The twin of _generate, deliberately: LangChain's default would run the script,
        # which answers at once, in a worker thread.
        return self._generate(messages, stop)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self


# --- the tools ---------------------------------------------------------------------


class RefundLedger:
    """The refunds actually issued: the side effect that only an approval unlocks.

    Thread-safe, so concurrent approvers in a test can share one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._issued: list[dict[str, Any]] = []

    def issue(self, order_id: str, amount: float) -> dict[str, Any]:
        """Record one refund and return its receipt."""
        receipt = {"refunded": True, "order_id": order_id, "amount": amount}
        with self._lock:
            self._issued.append(receipt)
        return receipt

    @property
    def issued(self) -> list[dict[str, Any]]:
        """A copy of the receipts, in the order the refunds were issued."""
        with self._lock:
            return list(self._issued)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self._issued)


def _request_refund(order_id: str, amount: float) -> InterruptRequest:
    """Ask a person to approve refunding `amount` dollars to order `order_id`."""
    return request_interrupt(
        APPROVAL,
        {
            "order_id": order_id,
            "amount": amount,
            "question": f"Refund {_money(amount)} to order {order_id}?",
        },
    )


def refund_tools(ledger: RefundLedger | None = None) -> list[BaseTool]:
    """The agent's two tools: ``request_refund`` (asks a person) and ``issue_refund``.

    ``issue_refund`` records into ``ledger`` (a fresh one when omitted); the scripted
    model only calls it after an approval.
    """
    book = ledger if ledger is not None else RefundLedger()

    def issue_refund(order_id: str, amount: float) -> dict[str, Any]:
        return book.issue(order_id, amount)

    request = StructuredTool.from_function(
        _request_refund,
        name="request_refund",
        description="Ask a person to approve a refund of `amount` dollars to order `order_id`.",
    )
    issue = StructuredTool.from_function(
        issue_refund,
        name="issue_refund",
        description="Issue a refund of `amount` dollars to order `order_id` (after approval).",
    )
    return [request, issue]


# --- the graph ---------------------------------------------------------------------


def build_agent_graph(
    store: InterruptStore | AsyncInterruptStore | None = None,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None,
    ttl_seconds: float | None = None,
    model: BaseChatModel | None = None,
    tools: Sequence[BaseTool] | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build and compile the refund agent: the canonical wiring of the interrupt protocol.

    Nodes: ``agent`` (the chat model with the tools bound), ``tools``
    (:func:`~symfonic_store.create_tools_node`: a tool that returns
    :func:`~symfonic_store.request_interrupt` sets ``_interrupt_pending``) and
    ``interrupt`` (:func:`~symfonic_store.create_interrupt_node`: pauses the graph and
    turns the answer into the tool call's ``ToolMessage``). After ``agent`` and after
    ``tools`` one router decides: ``"interrupt"`` -> ``interrupt``; ``"continue"`` ->
    ``tools`` (from ``agent``) or ``agent`` (from ``tools``); ``"finish"`` -> the end
    (from ``agent``) or ``agent`` (from ``tools``). The agent has no elicitation node, so
    ``"elicitation"`` ends the run from ``agent`` and returns to ``agent`` from ``tools``.
    ``interrupt`` always returns to ``agent``.

    Args:
        store: with a store, the router is :func:`~symfonic_store.make_interrupt_router`
            (every decision, mint and stale expiry is recorded) and the interrupt node
            checks every answer against the store. An :class:`AsyncInterruptStore` needs
            ``ainvoke``/``astream``. Without a store the graph is the plain seed
            protocol: the router is :func:`~symfonic_store.interrupt_condition`.
        checkpointer: where LangGraph keeps the paused threads; interrupts need one.
            ``None`` only when the runtime supplies its own (e.g. a LangGraph server).
        ttl_seconds: how old a pending interrupt may be before the router declares it
            stale; defaults to the store's TTL (with a store) or none.
        model: the chat model; defaults to :class:`ScriptedChatModel`. Its
            ``bind_tools`` is called with ``tools``.
        tools: defaults to :func:`refund_tools` with a fresh ledger; pass
            ``refund_tools(ledger)`` to watch the refunds issued.

    Returns:
        The compiled graph. Invoke it with
        ``config={"configurable": {"thread_id": ..., "actor": ...}}``; put a ``run_id``
        in the input to mark a new run (markers of older runs become stale).
    """
    tool_list = list(tools) if tools is not None else refund_tools()
    bound = (model if model is not None else ScriptedChatModel()).bind_tools(tool_list)

    def agent(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"], config)]}

    async def aagent(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"], config)]}

    router: Any
    if store is not None:
        router = make_interrupt_router(store, ttl_seconds)
    else:

        def router(state: dict[str, Any]) -> str:
            return interrupt_condition(state, ttl_seconds)

    agent_node: RunnableLambda[Any, dict[str, Any]] = RunnableLambda(
        agent, afunc=aagent, name="agent"
    )
    builder = StateGraph(InterruptState)
    builder.add_node("agent", agent_node)
    builder.add_node("tools", create_tools_node(tool_list))
    builder.add_node("interrupt", create_interrupt_node(store))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges(
        "agent",
        router,
        {"interrupt": "interrupt", "continue": "tools", "finish": END, "elicitation": END},
    )
    builder.add_conditional_edges(
        "tools",
        router,
        {"interrupt": "interrupt", "continue": "agent", "finish": "agent", "elicitation": "agent"},
    )
    builder.add_edge("interrupt", "agent")
    return builder.compile(checkpointer=checkpointer)


__all__ = [
    "APPROVAL",
    "RefundLedger",
    "ScriptedChatModel",
    "build_agent_graph",
    "refund_tools",
    "scripted_reply",
]
