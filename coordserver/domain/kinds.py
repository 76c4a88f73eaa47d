"""Who is who (issue 28): every identity is a human or an agent, by its users row's `is_agent`.

The rule is one: an identity is an agent when its users row says so; no row (an environment identity
that has not called yet, a token identity) is a human. Environment identities named in COORD_AGENTS
get a users row saying agent at every start (`declare_env_agents`), so the rule holds for them too.
Set at invite creation (the invite carries it), registration, token creation (`coordserver token
create --agent`) and by an admin (PATCH /api/admin/users/{id}). The loop guard (domain/guards.py)
reads it as "no human takes part"; messages, asks, chat messages and presence carry it.
"""
from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from .. import db
from ..models import User
from ..sql import in_list
from ..timeutil import to_db


def is_agent_sql(column: str) -> str:
    """A SQL boolean: the identity in `column` is an agent."""
    return f'EXISTS (SELECT 1 FROM "user" kind_u WHERE kind_u.id = {column} AND kind_u.is_agent)'


@lru_cache(maxsize=16)
def _agents_sql(count: int) -> str:
    return f'SELECT id FROM "user" WHERE is_agent AND id IN {in_list(count)}'


def agents_among(identities: Iterable[str]) -> set[str]:
    """Which of these identities are agents (one indexed query; fixed SQL: every send and chat message asks, and
    Peewee composing the query cost a fifth of a send's CPU)."""
    names = sorted(set(identities))
    if not names:
        return set()
    return {identity for (identity,) in db.sql_rows(_agents_sql(len(names)), names)}


def is_agent(identity: str) -> bool:
    return identity in agents_among([identity])


def declare_env_agents(agents: frozenset[str]) -> None:
    """At start: COORD_AGENTS' identities get a users row saying agent (created if missing, flag set
    if present). Safe when several processes start at once (insert-or-ignore, then update)."""
    now = to_db(db.now())
    for identity in sorted(agents):
        User.insert(id=identity, display_name=identity, is_admin=False, is_agent=True, created_at=now,
                    updated_at=now).on_conflict_ignore().execute()
    if agents:
        User.update(is_agent=True).where(User.id.in_(sorted(agents)) & (User.is_agent == False)).execute()  # noqa: E712
