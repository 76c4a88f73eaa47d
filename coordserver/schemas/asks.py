"""Ask request and response models (skill page `asks`). Every limit comes from domain/asks.py, which checks
the same rules again (it is callable without HTTP)."""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.asks import (LABEL_MAX, OPTIONS_MAX, OPTIONS_MIN, QUESTION_MAX, TASK_ID_MAX, TEXT_MAX, TO_MAX,
                           ANSWER_ONE, NEEDS_OPTIONS, DEFAULT_NEEDS_OPTIONS)
from .base import Model, Query, RowId, text
from .common import IDENTITY_RULE, Identity, Limit, Time, clamp_limit

# `to` is typed loosely for msgspec (a pattern on the text beside a list of patterned text crashes msgspec 0.22
# at exit, as buzz's forUsers says); the schema states each form and __post_init__ enforces exactly that.
_IDENTITY_SCHEMA = msgspec.json.schema(Identity)
_TO_SCHEMA = {"description": f"an identity, or a list of 1 to {TO_MAX} (a group: one answer answers for all)",
              "anyOf": [_IDENTITY_SCHEMA, {"type": "array", "items": _IDENTITY_SCHEMA, "minItems": 1,
                                           "maxItems": TO_MAX}]}
_IDENTITY_PATTERN = re.compile(_IDENTITY_SCHEMA["pattern"])

Label = Annotated[str, text(LABEL_MAX, "an option's label")]
OptionNumber = Annotated[int, msgspec.Meta(ge=1, le=OPTIONS_MAX, description="an option's number, 1 for the first")]
Options = Annotated[list[Label], msgspec.Meta(min_length=OPTIONS_MIN, max_length=OPTIONS_MAX,
                                              description="distinct labels, shown numbered from 1")]
_STATUS = Literal["open", "answered", "expired", "cancelled"]


class AskContext(Model):
    """What the ask is about: a mailbox message, a task or an alert (usually one of them; a pointer for the
    client to open, whose reading follows that object's own rules). An empty context is no context."""
    message_id: RowId | UnsetType = UNSET
    task_id: Annotated[str, text(TASK_ID_MAX)] | UnsetType = UNSET
    alert_id: RowId | UnsetType = UNSET

    def plain(self) -> dict[str, Any]:
        return {field.encode_name: getattr(self, field.name) for field in msgspec.structs.fields(self)
                if getattr(self, field.name) is not UNSET}


def _default_fits() -> list[dict[str, Any]]:
    """defaultOption names one of the options: for each number of options, the largest number it may be."""
    return [{"required": ["options"], "properties": {"options": {"minItems": n, "maxItems": n},
                                                     "defaultOption": {"maximum": n}}}
            for n in range(OPTIONS_MIN, OPTIONS_MAX + 1)]


class NewAsk(Model):
    """POST /api/asks. `to`: one identity or a list (a group: the first answer from any of them answers for
    all). `options` and/or `allowText` (an ask must be answerable); `defaultOption` (1-based) is applied when
    the deadline passes unanswered."""
    _OPTIONS = (f"options must be a list of {OPTIONS_MIN} to {OPTIONS_MAX} distinct labels of at most {LABEL_MAX} "
                "characters")
    __messages__ = {"to": f"to must be an identity or a list of 1 to {TO_MAX} identities",
                    "options": _OPTIONS, "options:length": _OPTIONS,
                    "deadline": "deadline must be an ISO-8601 timestamp",
                    "context": f"context holds messageId (an integer), taskId (text of at most {TASK_ID_MAX} "
                               "characters) or alertId (an integer)"}
    # What the fields cannot say alone, for the schema; __post_init__ enforces the same.
    __schema_extra__ = {"allOf": [
        {"anyOf": [{"required": ["options"]},
                   {"required": ["allowText"], "properties": {"allowText": {"const": True}}}]},
        {"anyOf": [{"not": {"required": ["defaultOption"]}}, {"properties": {"defaultOption": {"type": "null"}}},
                   *_default_fits()]}]}
    to: str | list[str]
    question: Annotated[str, text(QUESTION_MAX)]
    options: Options | UnsetType = UNSET
    allow_text: bool = False
    deadline: Time | None = None
    default_option: OptionNumber | None = None
    context: AskContext | None = None

    def __post_init__(self) -> None:
        to = [self.to] if isinstance(self.to, str) else self.to
        if not 1 <= len(to) <= TO_MAX:
            raise ValueError(self.__messages__["to"])
        if not all(_IDENTITY_PATTERN.match(identity) for identity in to):
            raise ValueError(f"to: {IDENTITY_RULE}")
        options = [] if self.options is UNSET else self.options
        if len(set(options)) != len(options):
            raise ValueError(self.__messages__["options"])
        if not options and not self.allow_text:
            raise ValueError(NEEDS_OPTIONS)
        if self.default_option is not None and self.default_option > len(options):
            raise ValueError(DEFAULT_NEEDS_OPTIONS)

    def fields(self) -> dict[str, Any]:
        """The domain's keyword arguments (asks.create)."""
        return {"to": [self.to] if isinstance(self.to, str) else list(self.to), "question": self.question,
                "options": [] if self.options is UNSET else list(self.options), "allow_text": self.allow_text,
                "deadline": self.deadline, "default_option": self.default_option,
                "context": (self.context.plain() or None) if self.context is not None else None}


NewAsk.__field_schemas__ = {"to": _TO_SCHEMA, "options": {**msgspec.json.schema(Options), "uniqueItems": True}}


class AskAnswer(Model):
    """POST /api/asks/{id}/answer: `option` (its number, or its label) or, where the ask allows it, `text`."""
    __schema_extra__ = {"oneOf": [{"required": ["option"]}, {"required": ["text"]}]}
    option: OptionNumber | Label | UnsetType = UNSET
    text: Annotated[str, text(TEXT_MAX)] | UnsetType = UNSET

    def __post_init__(self) -> None:
        if (self.option is UNSET) == (self.text is UNSET):
            raise ValueError(ANSWER_ONE)


class AsksQuery(Query):
    """GET /api/asks: the caller's asks, newest first; `role` received (put to the caller) or sent (by the
    caller), both when absent."""
    __messages__ = {"role": "role must be received or sent",
                    "status": "status must be open, answered, expired or cancelled"}
    role: Literal["received", "sent"] | None = None
    status: _STATUS | None = None
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.limit = clamp_limit(self.limit)


class Ask(Model, omit_defaults=False):
    """An ask. `option`/`text`: the answer once answered (`answeredBy` says who); on an expired ask `option` is the
    default applied, or null. `readAt`: when the asker read the outcome (its wake item left then)."""
    id: int
    from_: str = msgspec.field(name="from")
    from_is_agent: bool  # the asker's kind (who is who, issue 28)
    to: list[str]
    question: str
    options: list[str]
    allow_text: bool
    deadline: Time | None
    default_option: int | None
    context: AskContext | None
    status: _STATUS
    answered_by: str | None
    option: str | None
    text: str | None
    created_at: Time
    closed_at: Time | None
    read_at: Time | None


class Asks(Model):
    """Asks, newest first."""
    asks: list[Ask]
