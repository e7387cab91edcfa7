"""Who may answer what, and when to chase: the policy file of ``serve --policy FILE``
and ``sweep --policy FILE`` (SPEC §9, §14). Pure.

The file is JSON keyed by interrupt name, with ``"*"`` for every name it does not list
(native LangGraph interrupts often have no name)::

    {
      "refund_approval": {"roles": ["finance"], "four_eyes": true,
                          "remind_after": 3600, "escalate_after": 86400,
                          "escalate_to": ["finance_lead"]},
      "*": {"roles": ["approver", "finance"]}
    }

- ``roles``: the principal needs at least one of them; missing means any role (or
  none); ``[]`` means nobody may answer.
- ``four_eyes``: the requester -- the actor recorded on the mint -- may not answer
  their own interrupt. When the mint recorded no actor, nobody can be shown to be a
  second person, so the answer is refused (fail closed) and the message says why.

- ``remind_after`` (seconds): the sweep records ``interrupt.reminded`` once for an
  interrupt still open that long after its mint.
- ``escalate_after`` (seconds) with ``escalate_to`` (roles): the sweep records
  ``interrupt.escalated`` once for an interrupt still open that long; from then on a
  principal with one of the ``escalate_to`` roles may answer it too (``four_eyes``
  still applies). Neither event ends the interrupt.

- ``quorum`` (N >= 2): each answer is a vote (``interrupt.voted``); ``approve`` and
  ``accept`` votes of N distinct principals (the requester excluded under
  ``four_eyes``) resume it once; a ``reject`` vote ends it at once unless ``"veto":
  false``. ``reassign`` (roles): who may assign an interrupt already assigned (SPEC §15).

With no entry for the name and no ``"*"``, any authenticated principal may answer.
The name of a batched HITL request joins its actions' names with ``,``
(``send_wire,delete_file``); when that joined name is not listed itself, each
action's entry (else ``"*"``) applies, all of them, so batching actions never slips
one past its stricter rule. This policy is the service's; the store's own
``approvers=`` applies after it. For a batched name, the sweep chases on the earliest
threshold of the entries that apply, and escalates to all their ``escalate_to`` roles;
each entry then admits its own.

It lives below the server (the sweep reads it, and nothing of the store imports the
server); ``symfonic_store.server.Policy`` is the same class.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .config_file import read_config_text
from .errors import InvalidInputError

DEFAULT = "*"
_KEYS = (
    "roles", "four_eyes", "remind_after", "escalate_after", "escalate_to", "quorum", "veto", "reassign",
)


class Answerer(Protocol):
    """Who answers: a name and the roles it holds (the server's ``Principal``)."""

    @property
    def name(self) -> str: ...
    @property
    def roles(self) -> frozenset[str]: ...


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry of the policy file."""

    roles: frozenset[str] | None = None
    """At least one of these roles is needed; None: any."""
    four_eyes: bool = False
    """The requester (the mint's actor) may not answer; an unknown requester is refused."""
    remind_after: float | None = None
    """Seconds after its mint an open interrupt is reminded of (once); None: never."""
    escalate_after: float | None = None
    """Seconds after its mint an open interrupt is escalated (once); None: never."""
    escalate_to: frozenset[str] = frozenset()
    """The roles that may answer too once the interrupt is escalated."""
    quorum: int | None = None
    """N >= 2: each answer is a vote, and N distinct approvers resume it; None: one answer."""
    veto: bool = True
    """Under a quorum, a ``reject`` vote ends the interrupt at once."""
    reassign: frozenset[str] = frozenset()
    """The roles that may assign an interrupt already assigned."""


@dataclass(frozen=True, slots=True)
class Chase:
    """When the sweep chases an interrupt of one name: what the entries that apply say."""

    remind_after: float | None
    escalate_after: float | None
    escalate_to: tuple[str, ...]
    """Sorted role names (recorded as the escalation's ``to``)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """The rules by interrupt name, ``"*"`` for the rest (see the module doc)."""

    rules: Mapping[str, Rule]

    @classmethod
    def from_file(cls, path: str | Path) -> Policy:
        """Read a policy file.

        Raises:
            InvalidInputError: the file cannot be read, is not JSON, or an entry is malformed.
        """
        field = f"policy file {str(path)!r}"
        text = read_config_text(path, field)
        try:  # the wording of the CLI's JSON flags (cli/app.py json_value), deliberately
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(
                field, f"is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            ) from None
        except RecursionError:
            raise InvalidInputError(field, "is nested too deeply") from None
        return cls.from_dict(data, field=field)

    @classmethod
    def from_dict(cls, data: Any, *, field: str = "policy") -> Policy:
        """A policy from its JSON value.

        Raises:
            InvalidInputError: not an object of entries with the keys of the module doc.
        """
        if not isinstance(data, dict):
            raise InvalidInputError(field, "must be a JSON object keyed by interrupt name")
        rules: dict[str, Rule] = {}
        for name, entry in data.items():
            rules[name] = _rule(entry, f"{field}, entry {name!r}")
        return cls(rules)

    def rules_for(self, name: str | None) -> list[tuple[str, Rule]]:
        """The entries that apply to an interrupt of this name (see the module doc)."""
        if name is not None and name in self.rules:
            return [(name, self.rules[name])]
        if name is not None and "," in name:
            found: dict[str, Rule] = {}
            for part in name.split(","):
                key = part if part in self.rules else DEFAULT
                if key in self.rules:
                    found[key] = self.rules[key]
            return list(found.items())
        if DEFAULT in self.rules:
            return [(DEFAULT, self.rules[DEFAULT])]
        return []

    @property
    def chases(self) -> bool:
        """Does any entry remind or escalate (else the sweep need not look)?"""
        return any(r.remind_after is not None or r.escalate_after is not None for r in self.rules.values())

    def earliest(self) -> float | None:
        """The smallest threshold of any entry (seconds), None when nothing chases: no
        interrupt younger than this is due for anything."""
        found = [
            t for r in self.rules.values() for t in (r.remind_after, r.escalate_after) if t is not None
        ]
        return min(found) if found else None

    def chase_for(self, name: str | None) -> Chase | None:
        """When an interrupt of ``name`` is reminded of and escalated; None: never."""
        rules = [rule for _, rule in self.rules_for(name)]
        reminds = [r.remind_after for r in rules if r.remind_after is not None]
        escalations = [r for r in rules if r.escalate_after is not None]
        if not reminds and not escalations:
            return None
        return Chase(
            remind_after=min(reminds) if reminds else None,
            escalate_after=min(r.escalate_after for r in escalations if r.escalate_after is not None)
            if escalations else None,
            escalate_to=tuple(sorted({role for r in escalations for role in r.escalate_to})),
        )

    def quorum_for(self, name: str | None) -> tuple[int, bool, bool] | None:
        """``(needed, veto, four_eyes)`` when an interrupt of ``name`` is decided by votes:
        the largest quorum of the entries that apply (a veto and four-eyes when any asks
        it); None: one answer decides."""
        rules = [rule for _, rule in self.rules_for(name) if rule.quorum is not None]
        if not rules:
            return None
        return (
            max(r.quorum for r in rules if r.quorum is not None),
            any(r.veto for r in rules),
            any(r.four_eyes for _, r in self.rules_for(name)),
        )

    def reassign_roles(self, name: str | None) -> frozenset[str]:
        """The roles that may assign an already assigned interrupt of ``name``."""
        return frozenset(role for _, rule in self.rules_for(name) for role in rule.reassign)

    def escalates(self, name: str | None) -> bool:
        """Could an escalation let more roles answer an interrupt of ``name``?"""
        return any(rule.escalate_to for _, rule in self.rules_for(name))

    def refusal(
        self,
        principal: Answerer,
        name: str | None,
        requester: str | None,
        *,
        escalated: bool = False,
    ) -> str | None:
        """Why ``principal`` may not answer an interrupt of ``name`` asked by ``requester``;
        None when it may. ``escalated``: the sweep escalated the interrupt, so each entry's
        ``escalate_to`` roles may answer too."""
        for key, rule in self.rules_for(name):
            entry = "the default entry '*'" if key == DEFAULT else f"the entry for {key!r}"
            allowed = rule.roles
            if allowed is not None and escalated:
                allowed = allowed | rule.escalate_to
            if allowed is not None and not (principal.roles & allowed):
                if not allowed:
                    return f"{entry} of the policy lets nobody answer it"
                needed = ", ".join(sorted(allowed))
                held = ", ".join(sorted(principal.roles)) or "none"
                return (
                    f"{principal.name!r} may not answer it: {entry} of the policy needs one of "
                    f"the roles {needed} (held: {held})"
                )
            if rule.four_eyes and requester is None:
                return (
                    f"four-eyes ({entry} of the policy): the requester of this interrupt is "
                    "unknown (its mint recorded no actor), so no answer can be shown to come "
                    "from a second person; refused"
                )
            if rule.four_eyes and requester == principal.name:
                return (
                    f"four-eyes ({entry} of the policy): {principal.name!r} asked for this "
                    "interrupt and may not answer it; another person must"
                )
        return None


def _seconds(entry: dict[str, Any], key: str, where: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        math.isfinite(value) and value > 0
    ):
        raise InvalidInputError(where, f"{key!r} must be a number of seconds above 0")
    return float(value)


def _roles(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(r, str) and r for r in value)


def _rule(entry: Any, where: str) -> Rule:
    """One entry of the file (see the module doc)."""
    if not isinstance(entry, dict):
        raise InvalidInputError(where, 'must be an object like {"roles": [...], "four_eyes": false}')
    unknown = set(entry) - set(_KEYS)
    if unknown:
        raise InvalidInputError(
            where, f"has unknown key(s) {', '.join(sorted(map(repr, unknown)))}; "
            f"the keys are {', '.join(map(repr, _KEYS))}"
        )
    roles = entry.get("roles")
    if roles is not None and not _roles(roles):
        raise InvalidInputError(where, "'roles' must be a list of role names")
    four_eyes = entry.get("four_eyes", False)
    if not isinstance(four_eyes, bool):
        raise InvalidInputError(where, "'four_eyes' must be true or false")
    remind_after = _seconds(entry, "remind_after", where)
    escalate_after = _seconds(entry, "escalate_after", where)
    escalate_to = entry.get("escalate_to")
    if escalate_to is not None and not (_roles(escalate_to) and escalate_to):
        raise InvalidInputError(where, "'escalate_to' must be a non-empty list of role names")
    if (escalate_after is None) != (escalate_to is None):
        raise InvalidInputError(
            where, "'escalate_after' and 'escalate_to' go together: when to escalate, and to whom"
        )
    quorum = entry.get("quorum")
    if quorum is not None and (isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 2):
        raise InvalidInputError(where, "'quorum' must be a whole number of approvers, 2 or more")
    veto = entry.get("veto", True)
    if not isinstance(veto, bool):
        raise InvalidInputError(where, "'veto' must be true or false")
    reassign = entry.get("reassign")
    if reassign is not None and not _roles(reassign):
        raise InvalidInputError(where, "'reassign' must be a list of role names")
    return Rule(
        None if roles is None else frozenset(roles),
        four_eyes,
        remind_after,
        escalate_after,
        frozenset(escalate_to or ()),
        quorum,
        veto,
        frozenset(reassign or ()),
    )


def policy_of(value: Policy | Mapping[str, Any] | None, field: str = "policy") -> Policy | None:
    """A :class:`Policy` from itself, its JSON value, or None.

    Raises:
        InvalidInputError: ``value`` is neither, or a malformed policy.
    """
    if value is None or isinstance(value, Policy):
        return value
    if isinstance(value, Mapping):
        return Policy.from_dict(dict(value), field=field)
    raise InvalidInputError(field, "must be a Policy, its JSON object, or None")
