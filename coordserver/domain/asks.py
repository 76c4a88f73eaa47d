"""Asks: a question with options put to one identity or a group, answered once (skill page `asks`).

An ask is `open` until exactly one of these happens, each a conditional UPDATE on `status = 'open'` so of
racing writers (two answers, an answer and the expiry pass, two processes' passes) exactly one wins:
- answered: the first answer from anyone asked (a group ask is answered once for all);
- cancelled: by its asker;
- expired: its deadline passed (the expiry pass, `expire_due`, which every process runs; the default
  option, if any, becomes the answer).
Every change logs its event in the same unit, addressed to the asker and those asked (so stream resume,
replay and the wake cache see it): `ask`, `ask_answered`, `ask_expired`, `ask_cancelled`, and `ask_read`
when the asker reads a closed ask's outcome (GET /api/asks/{id}: its wake item leaves then). Only the
asker and those asked may see an ask; to anyone else it does not exist (404).

Wake: those asked have an `ask` item (high priority, the options in it) while it is open; the asker has an
`ask_result` item (normal) once it is answered or expired, until read.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import peewee as pw

from .. import db
from ..errors import Conflict, Forbidden, Invalid, NotFound
from ..events import log
from ..events.channels import ASKS, AsksPayload
from . import wake_signal
from ..models import Ask, AskRecipient
from ..timeutil import from_db, iso, parse_iso, to_db
from . import kinds
from .identities import is_known, valid_identity

QUESTION_MAX = 2_000
TEXT_MAX = 2_000  # a text answer
LABEL_MAX = 50
OPTIONS_MIN, OPTIONS_MAX = 2, 9
TO_MAX = 20
TASK_ID_MAX = 36
SUMMARY_QUESTION = 100  # characters of the question a wake summary quotes
EXPIRE_BATCH = 100  # asks one expiry unit closes at most (the pass repeats while it finds more)
STATUSES = ("open", "answered", "expired", "cancelled")

# Refusals the request models word the same way (schemas/asks.py)
ANSWER_ONE = "Answer with option or text, not both"
NEEDS_OPTIONS = "An ask needs options, allowText, or both"
DEFAULT_NEEDS_OPTIONS = "defaultOption must be the number of one of the options"
NOT_FOUND = "Ask not found"

Status = Literal["open", "answered", "expired", "cancelled"]


def _stamp() -> datetime:
    """The unit's 'now' as stored (naive UTC)."""
    now = to_db(db.now())
    assert now is not None
    return now


# --- wire shapes -----------------------------------------------------------------------------

def ask_json(ask: Ask, agents: set[str] | None = None) -> dict[str, Any]:
    """The wire Ask; `agents`: which askers are agents, when the caller looked them up for many asks."""
    if agents is None:
        agents = kinds.agents_among([ask.asker])
    return {"id": ask.id, "from": ask.asker, "fromIsAgent": ask.asker in agents, "to": list(ask.recipients), "question": ask.question,
            "options": list(ask.options or []), "allowText": bool(ask.allow_text), "deadline": iso(ask.deadline),
            "defaultOption": ask.default_option, "context": ask.context, "status": ask.status,
            "answeredBy": ask.answered_by, "option": ask.option, "text": ask.text, "createdAt": iso(ask.created_at),
            "closedAt": iso(ask.closed_at), "readAt": iso(ask.read_at)}


def _audience(ask: Ask) -> list[str]:
    return [ask.asker, *ask.recipients]


def _event(kind: str, ask: Ask, **extra: Any) -> None:
    """Log `kind` for the asker and those asked, and tell waiters in every process (bus ASKS)."""
    data = {"type": kind, "askId": ask.id, "from": ask.asker, "to": list(ask.recipients), **extra}
    log.append(kind, data, to=_audience(ask))
    db.after_commit(ASKS, AsksPayload(askId=ask.id, status=ask.status, deadline=iso(ask.deadline)))


# --- checks (the request models check the same; these keep the domain safe without HTTP) --------

def _recipients(to: object, env_identities: frozenset[str]) -> list[str]:
    if isinstance(to, str):
        to = [to]
    if not isinstance(to, list) or not 1 <= len(to) <= TO_MAX:
        raise Invalid(f"to must be an identity or a list of 1 to {TO_MAX} identities")
    recipients = list(dict.fromkeys(valid_identity(identity) for identity in to))
    for identity in recipients:
        if not is_known(identity, env_identities):
            raise Invalid(f"Unknown identity for to: {identity}")
    return recipients


def _question(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("question is required")
    if len(value) > QUESTION_MAX:
        raise Invalid(f"question is longer than {QUESTION_MAX} characters")
    return value


def _options(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not (value == [] or OPTIONS_MIN <= len(value) <= OPTIONS_MAX) \
            or not all(isinstance(o, str) and o.strip() and len(o) <= LABEL_MAX for o in value) \
            or len(set(value)) != len(value):
        raise Invalid(f"options must be a list of {OPTIONS_MIN} to {OPTIONS_MAX} distinct labels of at most "
                      f"{LABEL_MAX} characters")
    return list(value)


def _deadline(value: object, now: datetime) -> datetime | None:
    if value is None:
        return None
    try:
        deadline = parse_iso(value) if isinstance(value, str) else value
    except ValueError:
        raise Invalid("deadline must be an ISO-8601 timestamp") from None
    if not isinstance(deadline, datetime):
        raise Invalid("deadline must be an ISO-8601 timestamp")
    if deadline <= now:
        raise Invalid("deadline must be in the future")
    return deadline


# --- asking ----------------------------------------------------------------------------------

def create(asker: str, fields: dict[str, Any], env_identities: frozenset[str]) -> dict[str, Any]:
    """`fields`: to, question, options, allow_text, deadline, default_option, context (schemas/asks.py NewAsk)."""
    now = db.now()
    recipients = _recipients(fields.get("to"), env_identities)
    question, options = _question(fields.get("question")), _options(fields.get("options"))
    allow_text = bool(fields.get("allow_text"))
    if not options and not allow_text:
        raise Invalid(NEEDS_OPTIONS)
    default = fields.get("default_option")
    if default is not None and (not isinstance(default, int) or not 1 <= default <= len(options)):
        raise Invalid(DEFAULT_NEEDS_OPTIONS)
    deadline = _deadline(fields.get("deadline"), now)
    ask = Ask.create(asker=asker, recipients=recipients, question=question, options=options or None,
                     allow_text=allow_text, deadline=to_db(deadline), default_option=default,
                     context=fields.get("context"), status="open", created_at=to_db(now))
    AskRecipient.insert_many([{"ask": ask.id, "identity": identity} for identity in recipients]).execute()
    _event("ask", ask, question=question, options=options, allowText=allow_text, deadline=iso(deadline))
    for identity in recipients:
        wake_signal.enters_wake(identity, asker)
    return ask_json(ask)


def _visible(identity: str, ask_id: int) -> Ask:
    """The ask, if `identity` asked it or was asked; else 404 (it does not exist for them)."""
    mine = AskRecipient.select(AskRecipient.ask).where(AskRecipient.identity == identity)
    ask = Ask.get_or_none((Ask.id == ask_id) & ((Ask.asker == identity) | Ask.id.in_(mine)))
    if ask is None:
        raise NotFound(NOT_FOUND)
    return ask


def get(identity: str, ask_id: int) -> tuple[dict[str, Any], bool]:
    """(The ask, whether this read is its asker's first of a closed outcome: mark_read should follow.)"""
    ask = _visible(identity, ask_id)
    return ask_json(ask), ask.asker == identity and ask.status != "open" and ask.read_at is None


def mark_read(identity: str, ask_id: int) -> dict[str, Any]:
    """The asker has read the outcome of a closed ask: its `ask_result` wake item leaves (once)."""
    ask = _visible(identity, ask_id)
    marked = Ask.update(read_at=_stamp()).where(
        (Ask.id == ask_id) & (Ask.asker == identity) & (Ask.status != "open") & Ask.read_at.is_null()).execute()
    if marked:
        ask = Ask.get_by_id(ask_id)
        log.append("ask_read", {"type": "ask_read", "askId": ask.id, "from": ask.asker}, to=[ask.asker])
    return ask_json(ask)


def list_asks(identity: str, role: str | None, status: str | None, limit: int) -> dict[str, Any]:
    received = Ask.id.in_(AskRecipient.select(AskRecipient.ask).where(AskRecipient.identity == identity))
    sent = Ask.asker == identity
    where = received if role == "received" else sent if role == "sent" else (sent | received)
    if status is not None:
        where &= Ask.status == status
    rows = list(Ask.select().where(where).order_by(Ask.id.desc()).limit(limit))
    agents = kinds.agents_among(ask.asker for ask in rows)
    return {"asks": [ask_json(ask, agents) for ask in rows]}


# --- closing: the first change wins ------------------------------------------------------------

def _refuse_closed(ask: Ask) -> Conflict:
    if ask.status == "answered":
        return Conflict(f"Already answered by {ask.answered_by}", answeredBy=ask.answered_by, status=ask.status)
    if ask.status == "expired":
        return Conflict("The ask has expired", status=ask.status)
    if ask.status == "cancelled":
        return Conflict("The ask was cancelled", status=ask.status)
    return Conflict("The ask's deadline has passed", status="expired")  # open still: the expiry pass is due


def _chosen(ask: Ask, option: int | str | None, text: str | None) -> tuple[str | None, str | None]:
    options = list(ask.options or [])
    if (option is None) == (text is None):
        raise Invalid(ANSWER_ONE)
    if text is not None:
        if not ask.allow_text:
            raise Invalid("This ask takes one of its options, not text")
        if not isinstance(text, str) or not text.strip() or len(text) > TEXT_MAX:
            raise Invalid(f"text must be 1 to {TEXT_MAX} characters")
        return None, text
    if isinstance(option, bool) or not isinstance(option, (int, str)):
        raise Invalid("option must be an option's number or label")
    if isinstance(option, int):
        if not 1 <= option <= len(options):
            raise Invalid(f"Unknown option for this ask: {option}")
        return options[option - 1], None
    if option not in options:
        raise Invalid(f"Unknown option for this ask: {option}")
    return option, None


def answer(identity: str, ask_id: int, option: int | str | None, text: str | None) -> dict[str, Any]:
    ask = _visible(identity, ask_id)
    if identity not in ask.recipients:
        raise Forbidden("Only those asked may answer")
    label, text = _chosen(ask, option, text)
    now = _stamp()
    open_now = (Ask.id == ask_id) & (Ask.status == "open") & (Ask.deadline.is_null() | (Ask.deadline > now))
    won = Ask.update(status="answered", answered_by=identity, option=label, text=text, closed_at=now).where(
        open_now).execute()
    ask = Ask.get_by_id(ask_id)
    if not won:
        raise _refuse_closed(ask)
    _event("ask_answered", ask, question=ask.question, answeredBy=identity, option=label, text=text)
    wake_signal.enters_wake(ask.asker, identity)
    return ask_json(ask)


def cancel(identity: str, ask_id: int) -> dict[str, Any]:
    ask = _visible(identity, ask_id)
    if ask.asker != identity:
        raise Forbidden("Only the asker may cancel an ask")
    now = _stamp()
    # The asker needs no reminder of their own cancellation: it is read at once.
    won = Ask.update(status="cancelled", closed_at=now, read_at=now).where(
        (Ask.id == ask_id) & (Ask.status == "open")).execute()
    ask = Ask.get_by_id(ask_id)
    if not won:
        raise _refuse_closed(ask)
    _event("ask_cancelled", ask, question=ask.question)
    return ask_json(ask)


def expire_due(limit: int = EXPIRE_BATCH) -> int:
    """One expiry pass (a unit of its own: Store.write_alone): open asks whose deadline has passed expire,
    their default option (if any) becoming the answer. Returns how many this unit expired; an ask another
    process expired first is skipped (its conditional update changes nothing)."""
    now = _stamp()
    due = [ask.id for ask in Ask.select(Ask.id).where((Ask.status == "open") & (Ask.deadline <= now))
           .order_by(Ask.deadline, Ask.id).limit(limit)]
    expired = 0
    for ask_id in due:
        with db.current_database().atomic():  # a savepoint: one failing ask never spoils the others
            expired += _expire(ask_id, now)
    return expired


def _expire(ask_id: int, now: datetime) -> int:
    ask = Ask.get_or_none(Ask.id == ask_id)
    if ask is None:
        return 0
    options = list(ask.options or [])
    default = options[ask.default_option - 1] if ask.default_option and ask.default_option <= len(options) else None
    won = Ask.update(status="expired", option=default, closed_at=now).where(
        (Ask.id == ask_id) & (Ask.status == "open") & (Ask.deadline <= now)).execute()
    if not won:
        return 0
    ask = Ask.get_by_id(ask_id)
    _event("ask_expired", ask, question=ask.question, option=default)
    wake_signal.enters_wake(ask.asker, None)
    return 1


def next_deadline() -> datetime | None:
    """The earliest deadline of an open ask (the expiry pass sleeps until then)."""
    value: datetime | str | None = Ask.select(pw.fn.MIN(Ask.deadline)).where(
        (Ask.status == "open") & Ask.deadline.is_null(False)).scalar()
    return from_db(value)


# --- wake ------------------------------------------------------------------------------------

def _quoted(question: str) -> str:
    line = " ".join(question.split())
    return line if len(line) <= SUMMARY_QUESTION else line[:SUMMARY_QUESTION - 1] + "…"


def asked_items(identity: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Open asks put to `identity`, oldest first: high priority, with their options."""
    where = (Ask.status == "open") & Ask.id.in_(
        AskRecipient.select(AskRecipient.ask).where(AskRecipient.identity == identity))
    rows = list(Ask.select().where(where).order_by(Ask.id).limit(limit + 1))
    total = len(rows) if len(rows) <= limit else Ask.select().where(where).count()
    items = []
    for ask in rows[:limit]:
        how = "pick one of its options" if ask.options else "answer it in text"
        if ask.options and ask.allow_text:
            how += " (or answer in text)"
        items.append({"source": "ask", "id": ask.id, "summary": f"From {ask.asker}: '{_quoted(ask.question)}'",
                      "action": f"{ask.asker} asks you: {how}. POST /api/asks/{ask.id}/answer.",
                      "priority": "high", "from": ask.asker, "question": ask.question,
                      "options": list(ask.options or []), "allowText": bool(ask.allow_text),
                      "deadline": iso(ask.deadline), "ephemeral": False, "_at": from_db(ask.created_at)})
    return items, total


def _outcome(ask: Ask) -> str:
    if ask.status == "answered":
        said = ask.option if ask.option is not None else f'"{_quoted(ask.text or "")}"'
        return f"{ask.answered_by} answered '{_quoted(ask.question)}': {said}"
    if ask.option is not None:
        return f"'{_quoted(ask.question)}' expired unanswered: the default {ask.option} applies"
    return f"'{_quoted(ask.question)}' expired unanswered"


def result_items(identity: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The outcomes of `identity`'s asks (answered or expired) not read yet, oldest first."""
    where = (Ask.asker == identity) & Ask.status.in_(("answered", "expired")) & Ask.read_at.is_null()
    rows = list(Ask.select().where(where).order_by(Ask.closed_at, Ask.id).limit(limit + 1))
    total = len(rows) if len(rows) <= limit else Ask.select().where(where).count()
    return [{"source": "ask_result", "id": ask.id, "summary": _outcome(ask),
             "action": f"Read the outcome (GET /api/asks/{ask.id}, which clears this item) and act on it.",
             "priority": "normal", "status": ask.status, "answeredBy": ask.answered_by, "option": ask.option,
             "text": ask.text, "ephemeral": False, "_at": from_db(ask.closed_at)} for ask in rows[:limit]], total
