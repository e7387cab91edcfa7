"""The demo: a scripted refund agent on a real LangGraph graph (no model, no network).

``symfonic-store demo`` runs it; tests and benchmarks build its graph with
:func:`build_agent_graph`. Not part of the store's public face.
"""

from .agent import APPROVAL, RefundLedger, ScriptedChatModel, build_agent_graph, refund_tools
from .run import DemoRun, run_demo

__all__ = [
    "APPROVAL",
    "DemoRun",
    "RefundLedger",
    "ScriptedChatModel",
    "build_agent_graph",
    "refund_tools",
    "run_demo",
]
