"""Silence request and response models (skill page `buzz`, "Silences"). The rules are domain/silences.py's,
which checks them again (it is callable without HTTP)."""
from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from ..domain.silences import COMMENT_MAX, LABELS_MAX, MATCH_MAX, MINUTES_MAX
from .alerts import Alert
from .base import Model, RowId, text
from .common import Time

_COVERS_ONE = "A silence covers appName or webhookId, one of them"
_ENDS_ONE = "A silence ends with minutes or endsAt, one of them"
_MATCHES = "A silence matches on match.title, match.labels or both"
Labels = Annotated[dict[str, Annotated[str, msgspec.Meta(max_length=MATCH_MAX)]],
                   msgspec.Meta(min_length=1, max_length=LABELS_MAX)]


class SilenceMatch(Model, omit_defaults=False):
    """What a silence hides: a title (a case-insensitive substring, or `/a regular expression/`) and/or labels (each
    `name: value` must be among the event's labels)."""
    title: Annotated[str, text(MATCH_MAX)] | UnsetType = UNSET
    labels: Labels | UnsetType = UNSET

    def plain(self) -> dict[str, Any]:
        return {k: v for k, v in (("title", self.title), ("labels", self.labels)) if v is not UNSET}


class SilenceTarget(Model):
    """Which ingests: of one webhook or of every webhook of an app name, matching `match`."""
    __messages__ = {"minutes": f"minutes must be 1 to {MINUTES_MAX}", "endsAt": "endsAt must be an ISO-8601 timestamp",
                    "match": _MATCHES}
    __schema_extra__ = {"allOf": [{"oneOf": [{"required": ["appName"]}, {"required": ["webhookId"]}]}]}
    # match must hold title, labels or both (the nested model's own schema cannot say it: only routes' models get
    # their extra schema)
    __field_schemas__ = {"match": {"allOf": [{"$ref": "#/components/schemas/SilenceMatch"}], "minProperties": 1}}
    match: SilenceMatch
    app_name: Annotated[str, msgspec.Meta(min_length=1, max_length=50)] | UnsetType = UNSET
    webhook_id: RowId | UnsetType = UNSET

    def __post_init__(self) -> None:
        if (self.app_name is UNSET) == (self.webhook_id is UNSET):
            raise ValueError(_COVERS_ONE)
        if not self.match.plain():
            raise ValueError(_MATCHES)

    def fields(self) -> dict[str, Any]:
        return {"app_name": None if self.app_name is UNSET else self.app_name,
                "webhook_id": None if self.webhook_id is UNSET else self.webhook_id, "match": self.match.plain()}


class NewSilence(SilenceTarget):
    """POST /api/buzz/silences: `minutes` from now or `endsAt` (one of them), and a `comment` for the others."""
    __schema_extra__ = {"allOf": [{"oneOf": [{"required": ["appName"]}, {"required": ["webhookId"]}]},
                                  {"oneOf": [{"required": ["minutes"]}, {"required": ["endsAt"]}]}]}
    minutes: Annotated[int, msgspec.Meta(ge=1, le=MINUTES_MAX)] | UnsetType = UNSET
    ends_at: Time | UnsetType = UNSET
    comment: Annotated[str, text(COMMENT_MAX, blank=True)] = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.minutes is UNSET) == (self.ends_at is UNSET):
            raise ValueError(_ENDS_ONE)

    def fields(self) -> dict[str, Any]:
        return {**super().fields(), "minutes": None if self.minutes is UNSET else self.minutes,
                "ends_at": None if self.ends_at is UNSET else self.ends_at, "comment": self.comment}


class Silence(Model, omit_defaults=False):
    """A silence; `active` while it runs (until `endsAt`, or `endedAt` when someone ended it early)."""
    id: int
    app_name: str | None
    webhook_id: int | None
    match: SilenceMatch
    comment: str
    created_by: str
    created_at: Time
    ends_at: Time
    ended_at: Time | None
    ended_by: str | None
    active: bool


class Silences(Model):
    """Running silences and those that ended in the last 24 h, newest first."""
    silences: list[Silence]


class PreviewAlert(Alert, omit_defaults=False):
    """An alert the silence would have hidden events of, and how many."""
    matched: int


class SilencePreview(Model):
    """How many events of the last 24 h a silence would have matched, and which alerts (most matched first)."""
    events: int
    alerts: list[PreviewAlert]
