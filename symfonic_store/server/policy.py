"""Who may answer what: the policy file of ``serve --policy FILE`` (SPEC §9). Pure.

The file is JSON keyed by interrupt name, with ``"*"`` for every name it does not list
(native LangGraph interrupts often have no name)::

    {
      "refund_approval": {"roles": ["finance"], "four_eyes": true},
      "*": {"roles": ["approver", "finance"]}
    }

- ``roles``: the principal needs at least one of them; missing means any role (or
  none); ``[]`` means nobody may answer.
- ``four_eyes``: the requester -- the actor recorded on the mint -- may not answer
  their own interrupt. When the mint recorded no actor, nobody can be shown to be a
  second person, so the answer is refused (fail closed) and the message says why.

With no entry for the name and no ``"*"``, any authenticated principal may answer.
The name of a batched HITL request joins its actions' names with ``,``
(``send_wire,delete_file``); when that joined name is not listed itself, each
action's entry (else ``"*"``) applies, all of them, so batching actions never slips
one past its stricter rule. This policy is the service's; the store's own
``approvers=`` applies after it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from .config_file import read_config_text
from .principal import Principal

DEFAULT = "*"
_KEYS = {"roles", "four_eyes"}


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry of the policy file."""

    roles: frozenset[str] | None = None
    """At least one of these roles is needed; None: any."""
    four_eyes: bool = False
    """The requester (the mint's actor) may not answer; an unknown requester is refused."""


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
            InvalidInputError: not an object of ``{"roles": [...], "four_eyes": bool}`` entries.
        """
        if not isinstance(data, dict):
            raise InvalidInputError(field, "must be a JSON object keyed by interrupt name")
        rules: dict[str, Rule] = {}
        for name, entry in data.items():
            where = f"{field}, entry {name!r}"
            if not isinstance(entry, dict):
                raise InvalidInputError(where, 'must be an object like {"roles": [...], "four_eyes": false}')
            unknown = set(entry) - _KEYS
            if unknown:
                raise InvalidInputError(
                    where, f"has unknown key(s) {', '.join(sorted(map(repr, unknown)))}; "
                    "the keys are 'roles' and 'four_eyes'"
                )
            roles = entry.get("roles")
            if roles is not None and not (
                isinstance(roles, list) and all(isinstance(r, str) and r for r in roles)
            ):
                raise InvalidInputError(where, "'roles' must be a list of role names")
            four_eyes = entry.get("four_eyes", False)
            if not isinstance(four_eyes, bool):
                raise InvalidInputError(where, "'four_eyes' must be true or false")
            rules[name] = Rule(None if roles is None else frozenset(roles), four_eyes)
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

    def refusal(self, principal: Principal, name: str | None, requester: str | None) -> str | None:
        """Why ``principal`` may not answer an interrupt of ``name`` asked by ``requester``;
        None when it may."""
        for key, rule in self.rules_for(name):
            entry = "the default entry '*'" if key == DEFAULT else f"the entry for {key!r}"
            if rule.roles is not None and not (principal.roles & rule.roles):
                if not rule.roles:
                    return f"{entry} of the policy lets nobody answer it"
                needed = ", ".join(sorted(rule.roles))
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
