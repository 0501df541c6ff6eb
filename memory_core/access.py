"""Who may do what in which space: the roles of a space's members, checked in one place.

A space maps principals to a :class:`Role`; each role includes the ones below it
(``viewer`` < ``developer`` < ``owner``): viewers read, developers also write, owners own.
A request without a principal acts as the store's owner (``EngineSpec.owner``). A space one
may not see is reported exactly like a missing one (404), so ids cannot be probed.

    >>> Role.DEVELOPER.allows(Role.VIEWER), Role.VIEWER.allows(Role.DEVELOPER)
    (True, False)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from memory_core.config import EngineSpec, LimitsSpec
from memory_core.errors import invalid, not_found
from memory_core.store import StoreBackend
from memory_core.types import Space
from memory_core.validate import check_text

if TYPE_CHECKING:
    from memory_core.receipts import Receipt


class Role(str, Enum):
    """A member's role in a space, weakest first."""

    VIEWER = "viewer"
    DEVELOPER = "developer"
    OWNER = "owner"

    @property
    def level(self) -> int:
        return _ORDER.index(self)

    def allows(self, need: Role | str) -> bool:
        """Whether this role may do what ``need`` may."""
        return self.level >= Role(need).level


_ORDER = (Role.VIEWER, Role.DEVELOPER, Role.OWNER)
ROLES = tuple(r.value for r in _ORDER)  # the wire names, weakest first


def role_in(space: Space | None, principal: str) -> Role | None:
    """``principal``'s role in ``space`` (None: not a member, or no space)."""
    held = None if space is None else space.members.get(principal)
    return None if held is None else Role(held)


def may(space: Space | None, principal: str, need: Role | str) -> bool:
    """Whether ``principal`` holds at least ``need`` in ``space``."""
    role = role_in(space, principal)
    return role is not None and role.allows(need)


def check_ids(limits: LimitsSpec, space_id: Any, principal: Any) -> None:
    """A space id and a principal are short valid strings (422 before any lookup)."""
    check_text(space_id, "space_id", limits.max_id_chars, limit_name="max_id_chars")
    if principal is not None:
        check_text(principal, "principal", limits.max_id_chars, limit_name="max_id_chars")


def authorise(store: StoreBackend, limits: LimitsSpec, owner: str, space_id: str,
              principal: str | None, need: Role | str) -> Space:
    """The space, if ``principal`` (None: ``owner``) holds at least role ``need`` in it; 404
    otherwise (a space one may not see is reported exactly like a missing one)."""
    check_ids(limits, space_id, principal)
    space = store.get_space(space_id)
    if space is None or not may(space, principal if principal is not None else owner, need):
        raise not_found("space", space_id)
    return space


def eligible_spaces(store: StoreBackend, principal: str | None, owner: str,
                    need: Role | str = Role.VIEWER) -> list[Space]:
    """The spaces a routed request may consider: every non-default space where ``principal``
    (None: ``owner``) holds at least role ``need``."""
    who = principal if principal is not None else owner
    return [s for s in store.list_spaces() if not s.default and may(s, who, need)]


def may_read_receipt(receipt: Receipt, who: str, owner: str) -> bool:
    """A receipt is read by the principal whose request left it and by the store's owner
    (the operator: the dashboard and the workbench read every receipt)."""
    return who in (receipt.request.principal or owner, owner)


def check_members(members: Any, max_id_chars: int) -> Mapping[str, str]:
    """A space's ``members``: a non-empty mapping of principals to role names (422 else)."""
    if not isinstance(members, Mapping) or not members or not all(
            isinstance(p, str) and p and isinstance(r, str) and r in ROLES
            for p, r in members.items()):
        raise invalid("invalid_members", f"members must map principals to one of "
                      f"{', '.join(ROLES)}", "members")
    for p in members:
        check_text(p, "members", max_id_chars, limit_name="max_id_chars")
    return members


# a new space's id (the whole string: no trailing newline, which ``$`` alone would let in)
SPACE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


def check_new_space(spec: EngineSpec, space_id: Any, description: Any, default: Any,
                    members: Any) -> Mapping[str, str]:
    """A new space's fields checked (422 on the first bad one); returns its members (the
    store's owner as ``owner`` when none are given)."""
    if not isinstance(space_id, str) or not SPACE_ID.fullmatch(space_id):
        raise invalid("invalid_space_id", "space_id must be 1-128 characters of letters, "
                      "digits, '_', '.', ':' or '-', starting with a letter or digit",
                      "space_id")
    check_text(description, "description", spec.limits.max_content_chars,
               allow_empty=True, limit_name="max_content_chars")
    if not isinstance(default, bool):
        raise invalid("wrong_type", "default must be a boolean", "default")
    if members is None:
        members = {spec.owner: Role.OWNER.value}
    return check_members(members, spec.limits.max_id_chars)
