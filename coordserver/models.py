"""Peewee models for every area of the API. Columns are snake_case; the wire format is built in domain code."""
from __future__ import annotations

import threading
import uuid
from typing import Any, overload

import peewee as pw

from . import jsonstrict


class ThreadBoundDatabaseProxy(pw.DatabaseProxy):
    """A DatabaseProxy whose target is bound per thread. Each Store binds its own database on the
    threads it owns, so several stores (servers) can share one process, as tests with two servers
    do; a thread that bound nothing sees the database initialized last."""
    __slots__ = ("_default", "_local")

    def __init__(self) -> None:
        object.__setattr__(self, "_local", threading.local())
        object.__setattr__(self, "_default", None)
        super().__init__()

    @property
    def obj(self) -> pw.Database:
        return getattr(self._local, "database", None) or self._default

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr == "obj":
            object.__setattr__(self, "_default", value)
        else:
            object.__setattr__(self, attr, value)

    def bind_thread(self, database: pw.Database) -> None:
        self._local.database = database


database_proxy = ThreadBoundDatabaseProxy()


def new_uuid() -> str:
    return str(uuid.uuid4())


class JSONField(pw.TextField):
    """JSON stored as text, portable across SQLite and PostgreSQL."""

    @overload
    def db_value(self, value: None) -> None: ...
    @overload
    def db_value(self, value: dict[str, Any] | list[Any]) -> str: ...
    @overload
    def db_value(self, value: Any) -> str | None: ...
    def db_value(self, value: Any) -> str | None:
        return None if value is None else jsonstrict.dumps(value)

    def python_value(self, value: str | None) -> Any:
        return None if value is None else jsonstrict.loads_lenient(value)


class BaseModel(pw.Model):
    class Meta:
        database = database_proxy
        legacy_table_names = False


class SchemaVersion(BaseModel):
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    version = pw.IntegerField()


# --- identities, tokens, invites -------------------------------------------------------------

class User(BaseModel):
    id = pw.CharField(max_length=50, primary_key=True)
    display_name = pw.CharField(max_length=100)
    is_admin = pw.BooleanField(default=False)
    is_agent = pw.BooleanField(default=False)
    avatar_url = pw.CharField(max_length=500, null=True)
    created_at = pw.DateTimeField()
    updated_at = pw.DateTimeField()
    last_seen_at = pw.DateTimeField(null=True)
    last_seen_source = pw.CharField(max_length=10, null=True)
    archived_at = pw.DateTimeField(null=True)
    # Its loop-guard thresholds (domain/guards.py), set by an admin; null: the deployment's (COORD_LOOP_*).
    loop_messages = pw.IntegerField(null=True)
    loop_minutes = pw.IntegerField(null=True)


class Token(BaseModel):
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    identity = pw.CharField(max_length=50, index=True)
    token_hash = pw.CharField(max_length=64, unique=True)
    is_admin = pw.BooleanField(default=False)
    label = pw.CharField(max_length=100, null=True)
    created_by = pw.CharField(max_length=50, null=True)
    created_at = pw.DateTimeField()
    expires_at = pw.DateTimeField(null=True)
    last_used_at = pw.DateTimeField(null=True)
    revoked_at = pw.DateTimeField(null=True)
    backup_agent = pw.CharField(max_length=50, null=True, index=True)
    stale_trigger_hours = pw.IntegerField(default=4)


class Invite(BaseModel):
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    code = pw.CharField(max_length=64, unique=True)
    created_by = pw.CharField(max_length=50)
    identity_hint = pw.CharField(max_length=50, null=True)
    is_admin = pw.BooleanField(default=False)
    max_uses = pw.IntegerField(default=1)
    use_count = pw.IntegerField(default=0)
    expires_at = pw.DateTimeField(null=True)
    created_at = pw.DateTimeField()
    webhook_token = pw.CharField(max_length=128, null=True)
    is_agent = pw.BooleanField(null=True)  # (v9) the kind its registrations get; null: as the registrant says


class WebhookConfig(BaseModel):
    """An identity's push target. The token is a separate, recoverable secret (it signs deliveries)."""
    identity = pw.CharField(max_length=50, primary_key=True)
    url = pw.CharField(max_length=500, null=True)
    token = pw.CharField(max_length=128)
    updated_at = pw.DateTimeField()


# --- event log and push outbox ---------------------------------------------------------------

class Event(BaseModel):
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    type = pw.CharField(max_length=40)
    data = JSONField()
    to_all = pw.BooleanField(default=False)
    created_at = pw.DateTimeField(index=True)


class EventTarget(BaseModel):
    """Who an event is addressed to (absent when to_all): SSE resume is an indexed query per identity."""
    identity = pw.CharField(max_length=50)
    event = pw.BigIntegerField()

    class Meta:
        primary_key = pw.CompositeKey("identity", "event")


class WorkerCursor(BaseModel):
    """How far a log-driven worker (e.g. the push outbox feeder) has read the event log."""
    name = pw.CharField(max_length=40, primary_key=True)
    last_event_id = pw.BigIntegerField(default=0)
    updated_at = pw.DateTimeField(null=True)


class PushDelivery(BaseModel):
    id = pw.CharField(max_length=36, primary_key=True, default=new_uuid)
    identity = pw.CharField(max_length=50, index=True)
    event_id = pw.BigIntegerField(null=True)
    event_type = pw.CharField(max_length=40)
    body = pw.TextField()
    status = pw.CharField(max_length=12, default="pending")  # pending, delivered, failed
    attempts = pw.IntegerField(default=0)
    next_attempt_at = pw.DateTimeField()
    claimed_until = pw.DateTimeField(null=True)
    last_error = pw.CharField(max_length=300, null=True)
    last_status = pw.IntegerField(null=True)
    created_at = pw.DateTimeField()
    delivered_at = pw.DateTimeField(null=True)

    class Meta:
        indexes = ((("status", "next_attempt_at"), False),)


# --- mailbox ---------------------------------------------------------------------------------

class Message(BaseModel):
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    recipient = pw.CharField(max_length=50)
    sender = pw.CharField(max_length=50)
    title = pw.CharField(max_length=255)
    body = pw.TextField(default="")
    status = pw.CharField(max_length=10, default="unread")
    urgent = pw.BooleanField(default=False)
    created_at = pw.DateTimeField()
    viewed_at = pw.DateTimeField(null=True)
    thread_id = pw.CharField(max_length=100, null=True)
    reply_to_message_id = pw.BigIntegerField(null=True)
    dedupe_key = pw.CharField(max_length=255, null=True)
    metadata = JSONField(null=True)
    response_waiting = pw.BooleanField(default=False)
    waiting_responder = pw.CharField(max_length=50, null=True)
    waiting_since = pw.DateTimeField(null=True)

    class Meta:
        # Each listing order has an index it can walk without sorting (see domain/messages.py).
        indexes = (
            (("recipient", "status", "created_at", "id"), False),
            (("recipient", "created_at", "id"), False),
            (("sender", "created_at", "id"), False),
            (("sender", "recipient", "dedupe_key"), True),
            (("recipient", "response_waiting"), False),  # wake: pending replies
        )


# The unread inbox order: urgent first, then oldest first.
Message.add_index(Message.index(Message.recipient, Message.status, Message.urgent.desc(), Message.created_at,
                                Message.id, name="message_unread_order"))


# --- chat ------------------------------------------------------------------------------------

class ChatChannel(BaseModel):
    id = pw.CharField(max_length=36, primary_key=True, default=new_uuid)
    type = pw.CharField(max_length=10)  # dm, group
    name = pw.CharField(max_length=100, null=True)
    dm_key = pw.CharField(max_length=120, null=True, unique=True)
    created_by = pw.CharField(max_length=50)
    created_at = pw.DateTimeField()
    last_message_id = pw.BigIntegerField(null=True)


class ChatMember(BaseModel):
    channel = pw.CharField(max_length=36)
    identity = pw.CharField(max_length=50, index=True)
    joined_at = pw.DateTimeField()
    last_read_at = pw.DateTimeField(null=True)
    archived_at = pw.DateTimeField(null=True)

    class Meta:
        primary_key = pw.CompositeKey("channel", "identity")


class ChatMessage(BaseModel):
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    channel = pw.CharField(max_length=36)
    sender = pw.CharField(max_length=50)
    body = pw.TextField()
    created_at = pw.DateTimeField()
    edited_at = pw.DateTimeField(null=True)
    deleted_at = pw.DateTimeField(null=True)

    class Meta:
        indexes = ((("channel", "id"), False),)


# --- swarm -----------------------------------------------------------------------------------

class Project(BaseModel):
    id = pw.CharField(max_length=36, primary_key=True, default=new_uuid)
    title = pw.CharField(max_length=255)
    description = pw.TextField(null=True)
    website_url = pw.CharField(max_length=500, null=True)
    onedev_url = pw.CharField(max_length=500, null=True)
    github_url = pw.CharField(max_length=500, null=True)
    dokploy_deploy_url = pw.CharField(max_length=500, null=True)
    color = pw.CharField(max_length=7)
    project_lead_user_id = pw.CharField(max_length=50, null=True)
    developer_lead_user_id = pw.CharField(max_length=50, null=True)
    work_hours_start = pw.IntegerField(null=True)
    work_hours_end = pw.IntegerField(null=True)
    work_hours_timezone = pw.CharField(max_length=64, default="America/Chicago")
    blocking_mode = pw.BooleanField(default=False)
    archived_at = pw.DateTimeField(null=True)
    created_at = pw.DateTimeField()
    updated_at = pw.DateTimeField()
    created_by = pw.CharField(max_length=50, null=True)  # null on projects made before schema 3
    tagged_users = JSONField(null=True)  # null = open to everyone; else restricted (domain/project_access.py)


class ProjectTag(BaseModel):
    """The tagged identities of a restricted project, one row each: the visibility predicate is SQL."""
    project_id = pw.CharField(max_length=36)
    identity = pw.CharField(max_length=50)

    class Meta:
        primary_key = pw.CompositeKey("project_id", "identity")


class Task(BaseModel):
    id = pw.CharField(max_length=36, primary_key=True, default=new_uuid)
    project_id = pw.CharField(max_length=36, null=True, index=True)
    title = pw.CharField(max_length=255)
    detail = pw.TextField(null=True)
    follow_up = pw.TextField(null=True)
    creator_user_id = pw.CharField(max_length=50)
    assignee_user_id = pw.CharField(max_length=50, null=True)
    status = pw.CharField(max_length=12, default="ready")
    issue_url = pw.CharField(max_length=500, null=True)
    on_or_after_at = pw.DateTimeField(null=True)
    must_be_done_after_task_id = pw.CharField(max_length=36, null=True)
    sort_key = pw.DoubleField(null=True)  # eight bytes on both backends (migrations/v13.py)
    next_task_id = pw.CharField(max_length=36, null=True)
    next_task_assignee_user_id = pw.CharField(max_length=50, null=True)
    recurring_template_id = pw.CharField(max_length=36, null=True)
    recurring_instance_at = pw.DateTimeField(null=True)
    linked_notebook_pages = JSONField(null=True)
    created_at = pw.DateTimeField()
    updated_at = pw.DateTimeField()
    completed_at = pw.DateTimeField(null=True)
    # A lease (domain/leases.py): the holder's claim runs out at lease_expires_at unless renewed; a lease that
    # ran out leaves who held it and when, for their and the creator's wake, until the task moves on.
    lease_expires_at = pw.DateTimeField(null=True, index=True)
    lease_seconds = pw.IntegerField(null=True)
    lease_lapsed_by = pw.CharField(max_length=50, null=True)
    lease_lapsed_at = pw.DateTimeField(null=True)

    class Meta:
        indexes = (
            (("assignee_user_id", "status"), False),
            (("recurring_template_id", "recurring_instance_at"), True),
        )


class TaskEvent(BaseModel):
    id = pw.CharField(max_length=36, primary_key=True, default=new_uuid)
    task_id = pw.CharField(max_length=36, index=True)
    actor_user_id = pw.CharField(max_length=50)
    kind = pw.CharField(max_length=20)
    before_state = JSONField(null=True)
    after_state = JSONField(null=True)
    created_at = pw.DateTimeField()
    seq = pw.IntegerField(default=0)  # per-task order of history entries (created_at ties under a frozen clock)

    class Meta:
        indexes = ((("task_id", "seq"), True),)


class TaskPageLink(BaseModel):
    task_id = pw.CharField(max_length=36)
    notebook_page_id = pw.CharField(max_length=36)
    created_at = pw.DateTimeField()

    class Meta:
        primary_key = pw.CompositeKey("task_id", "notebook_page_id")


class RecurringTemplate(BaseModel):
    id = pw.CharField(max_length=36, primary_key=True, default=new_uuid)
    project_id = pw.CharField(max_length=36, null=True)
    title = pw.CharField(max_length=255)
    detail = pw.TextField(null=True)
    assignee_user_id = pw.CharField(max_length=50, null=True)
    creator_user_id = pw.CharField(max_length=50)
    cron_expr = pw.CharField(max_length=100)
    timezone = pw.CharField(max_length=64, default="America/Chicago")
    initial_status = pw.CharField(max_length=12, default="ready")
    enabled = pw.BooleanField(default=True)
    last_run_at = pw.DateTimeField(null=True)
    next_run_at = pw.DateTimeField(null=True, index=True)
    created_at = pw.DateTimeField()
    updated_at = pw.DateTimeField()


class Workflow(BaseModel):
    id = pw.CharField(max_length=36, primary_key=True, default=new_uuid)
    title = pw.CharField(max_length=255)
    description = pw.TextField(null=True)
    document_url = pw.CharField(max_length=500, null=True)
    document = JSONField(null=True)
    enabled = pw.BooleanField(default=True)
    tagged_users = JSONField(null=True)
    expires_at = pw.DateTimeField(null=True)
    review_at = pw.DateTimeField(null=True)
    created_by = pw.CharField(max_length=50)
    created_at = pw.DateTimeField()
    updated_at = pw.DateTimeField()


class TaskWorkflow(BaseModel):
    task_id = pw.CharField(max_length=36)
    workflow_id = pw.CharField(max_length=36, index=True)
    attached_by = pw.CharField(max_length=50)
    attached_at = pw.DateTimeField()

    class Meta:
        primary_key = pw.CompositeKey("task_id", "workflow_id")


# --- buzz ------------------------------------------------------------------------------------

class BuzzWebhook(BaseModel):
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    app_name = pw.CharField(max_length=50, index=True)
    token = pw.CharField(max_length=32)
    title = pw.CharField(max_length=255)
    owner = pw.CharField(max_length=50, index=True)
    for_users = pw.CharField(max_length=255, null=True)
    wake_agent = pw.CharField(max_length=50, null=True, index=True)
    notify_agent = pw.CharField(max_length=50, null=True, index=True)
    enabled = pw.BooleanField(default=True)
    created_at = pw.DateTimeField()
    last_hit_at = pw.DateTimeField(null=True)
    runbook_page_id = pw.CharField(max_length=36, null=True)  # a notebook page its alerts point to
    runbook_url = pw.CharField(max_length=2000, null=True)  # or a URL
    escalate_after_minutes = pw.IntegerField(null=True)  # an alert open this long wakes escalate_to
    escalate_to = pw.CharField(max_length=255, null=True)  # identities, a normalised comma list
    flap_resolutions = pw.IntegerField(null=True)  # its flap threshold; null: the deployment's (settings)
    flap_window_minutes = pw.IntegerField(null=True)  # its flap window; null: the deployment's


class BuzzEvent(BaseModel):
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    webhook_id = pw.BigIntegerField(index=True)
    app_name = pw.CharField(max_length=50)
    title = pw.CharField(max_length=255)
    for_users = pw.CharField(max_length=255, null=True)
    received_at = pw.DateTimeField()
    content_type = pw.CharField(max_length=100, default="text/plain")
    body_text = pw.TextField(null=True)
    body_json = JSONField(null=True)
    wake_agent = pw.CharField(max_length=50, null=True)
    notify_agent = pw.CharField(max_length=50, null=True)
    wake_delivered_at = pw.DateTimeField(null=True)
    notify_delivered_at = pw.DateTimeField(null=True)
    suppressed = pw.BooleanField(default=False)
    dedup_key = pw.CharField(max_length=255, null=True)
    alert_id = pw.BigIntegerField(null=True)  # the alert it belongs to (BuzzAlert; null before schema 7)
    silenced_by = pw.BigIntegerField(null=True)  # the BuzzSilence that hid it (stored and counted, no effects)

    class Meta:
        indexes = (
            (("wake_agent", "wake_delivered_at"), False),
            (("notify_agent", "notify_delivered_at"), False),
            (("webhook_id", "dedup_key", "received_at"), False),
            (("webhook_id", "received_at"), False),
            (("alert_id", "id"), False),  # an alert's recent events
        )


class BuzzAlert(BaseModel):
    """The persistent state above buzz events (domain/alerts.py): one per webhook and group key, open, acked,
    snoozed or resolved. The routing columns are the webhook's as of its latest ingest, so visibility and
    wake are indexed queries on this table alone."""
    id = pw.AutoField()
    webhook_id = pw.BigIntegerField()
    group_key = pw.CharField(max_length=255)
    app_name = pw.CharField(max_length=50)
    title = pw.CharField(max_length=255)
    for_users = pw.CharField(max_length=255, null=True)
    wake_agent = pw.CharField(max_length=50, null=True)
    notify_agent = pw.CharField(max_length=50, null=True)
    state = pw.CharField(max_length=10, default="open")  # open, acked, snoozed, resolved
    count = pw.IntegerField(default=0)  # firings (a resolved notification is not one)
    first_at = pw.DateTimeField()
    last_at = pw.DateTimeField()
    opened_at = pw.DateTimeField()  # when it last became open (created or reopened): time to acknowledge
    acked_by = pw.CharField(max_length=50, null=True)
    acked_at = pw.DateTimeField(null=True)
    snoozed_until = pw.DateTimeField(null=True)
    resolved_at = pw.DateTimeField(null=True)
    resolved_by = pw.CharField(max_length=50, null=True)  # null when the source resolved it
    last_event_id = pw.BigIntegerField(null=True)
    silenced_by = pw.BigIntegerField(null=True)  # the silence that hid its latest firing (it is then not in wake)
    runbook_page_id = pw.CharField(max_length=36, null=True)  # the webhook's, as of its latest ingest or change
    runbook_url = pw.CharField(max_length=2000, null=True)
    escalate_to = pw.CharField(max_length=255, null=True)
    escalate_at = pw.DateTimeField(null=True)  # when it escalates if still open (opened_at + the webhook's delay)
    escalated_at = pw.DateTimeField(null=True)  # it escalated (escalate_to were woken) since it last opened
    flapping = pw.BooleanField(default=False)  # resolved by its source too often within the flap window
    flap_started_at = pw.DateTimeField(null=True)  # the flap window it counts resolutions in
    flap_resolutions = pw.IntegerField(default=0)
    woken_at = pw.DateTimeField(null=True)  # while flapping: when it last woke anyone (once per window)

    class Meta:
        indexes = (
            (("webhook_id", "group_key"), True),  # the ingest's lookup; one alert per group
            (("wake_agent", "state"), False),  # wake: the identity's open alerts
            (("state", "snoozed_until"), False),  # the snooze pass: snoozed alerts by their end
            (("state", "escalate_at"), False),  # the escalation pass: open alerts by when they escalate
            (("state", "last_at"), False),  # listings by state, newest first
        )


class BuzzAlertTally(BaseModel):
    """Firings a merged batch of ingests counted on an alert, not yet folded into its row (domain/alert_tallies.py).
    A storm's batches insert these instead of updating the alert and webhook rows, which every batch of every
    worker would otherwise queue on; every read of an alert or of a webhook's lastHitAt adds the pending ones,
    and a pass folds them in. No foreign keys: an insert takes no lock on the alert's row beyond the batch's own."""
    id = pw.AutoField()
    alert_id = pw.BigIntegerField()
    webhook_id = pw.BigIntegerField()
    firings = pw.IntegerField()
    last_at = pw.DateTimeField()  # the batch's firings' time (its last, the alert's lastAt once folded)
    last_event_id = pw.BigIntegerField()  # the buzz_event of the batch's last firing into the alert
    title = pw.CharField(max_length=255)  # that firing's title

    class Meta:
        indexes = (
            (("alert_id", "last_event_id"), False),  # an alert's pending firings, the newest first
            (("webhook_id", "last_at"), False),  # a webhook's pending last hit
        )


class BuzzSilence(BaseModel):
    """Ingests of a webhook (or of every webhook of an app name) that match are stored and counted on their
    alert but have no effects, until `ends_at` or until ended (domain/silences.py)."""
    id = pw.AutoField()
    app_name = pw.CharField(max_length=50, null=True)
    webhook_id = pw.BigIntegerField(null=True)
    title_match = pw.CharField(max_length=255, null=True)  # a substring, or /a regular expression/
    labels = JSONField(null=True)  # {name: value}: every one must be among the event's labels
    comment = pw.TextField(default="")
    created_by = pw.CharField(max_length=50)
    created_at = pw.DateTimeField()
    ends_at = pw.DateTimeField()
    ended_at = pw.DateTimeField(null=True)  # ended early (DELETE)
    ended_by = pw.CharField(max_length=50, null=True)

    class Meta:
        indexes = ((("ends_at",), False),)  # the ingest's lookup: silences still running


# --- notebook and directory ------------------------------------------------------------------

class NotebookPage(BaseModel):
    id = pw.CharField(max_length=36, primary_key=True, default=new_uuid)
    title = pw.CharField(max_length=255)
    content = pw.TextField(default="")
    ydoc = pw.BlobField(null=True)
    created_by = pw.CharField(max_length=50)
    tagged_users = JSONField(null=True)
    tags = JSONField(null=True)
    expires_at = pw.DateTimeField(null=True)
    review_at = pw.DateTimeField(null=True)
    locked = pw.BooleanField(default=False)
    locked_by = pw.CharField(max_length=50, null=True)
    archived_at = pw.DateTimeField(null=True)
    created_at = pw.DateTimeField()
    updated_at = pw.DateTimeField(index=True)


class NotebookRelay(BaseModel):
    """A CRDT update too large for a bus notification: other processes load it by id. Short-lived."""
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    page_id = pw.CharField(max_length=36)
    # Named apart from its column: an attribute `update` would hide Model.update (the UPDATE query builder).
    payload = pw.BlobField(column_name="update")
    created_at = pw.DateTimeField(index=True)


class NotebookReadBase(BaseModel):
    """The document state an identity last read of a page: the base of their next PATCH of content
    (a three-way merge). In the database, so a PATCH served by any worker process finds it."""
    page_id = pw.CharField(max_length=36)
    identity = pw.CharField(max_length=50)
    state = pw.BlobField()
    read_at = pw.DateTimeField(index=True)

    class Meta:
        primary_key = pw.CompositeKey("page_id", "identity")


class NotebookVersion(BaseModel):
    """A stored snapshot of a page's text (domain/notebook_versions.py). Kept for the retention window;
    a page's newest version is never pruned."""
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    page_id = pw.CharField(max_length=36, index=True)
    content = pw.TextField()
    editors = JSONField(null=True)  # the identities who edited since the previous version
    reason = pw.CharField(max_length=20)  # created, time, idle, checkpoint, before_restore, restore
    label = pw.CharField(max_length=200, null=True)
    created_by = pw.CharField(max_length=50, null=True)  # who asked (checkpoint, restore)
    created_at = pw.DateTimeField(index=True)


class NotebookPendingEditor(BaseModel):
    """Who edited a page since its newest version: named by the next version, then dropped."""
    page_id = pw.CharField(max_length=36)
    identity = pw.CharField(max_length=50)
    edited_at = pw.DateTimeField()

    class Meta:
        primary_key = pw.CompositeKey("page_id", "identity")


# --- asks ------------------------------------------------------------------------------------

class Ask(BaseModel):
    """A question with options, from one identity to one or more (domain/asks.py): open, then answered,
    expired or cancelled, once. `option`/`text`: the answer (or the default applied at expiry)."""
    id = pw.AutoField()
    asker = pw.CharField(max_length=50)
    recipients = JSONField()  # the identities asked, in the order given (AskRecipient indexes them)
    question = pw.TextField()
    options = JSONField(null=True)  # labels, or null for a text-only ask
    allow_text = pw.BooleanField(default=False)
    deadline = pw.DateTimeField(null=True)
    default_option = pw.IntegerField(null=True)  # 1-based number of the option applied at the deadline
    context = JSONField(null=True)
    status = pw.CharField(max_length=10, default="open")  # open, answered, expired, cancelled
    answered_by = pw.CharField(max_length=50, null=True)
    option = pw.CharField(max_length=255, null=True)
    text = pw.TextField(null=True)
    created_at = pw.DateTimeField()
    closed_at = pw.DateTimeField(null=True)
    read_at = pw.DateTimeField(null=True)  # when the asker read the outcome (its wake item leaves then)

    class Meta:
        indexes = (
            (("asker", "id"), False),
            (("status", "deadline"), False),  # the expiry pass: open asks by deadline
            (("asker", "status", "read_at"), False),  # the asker's wake: closed, unread outcomes
        )


class AskRecipient(BaseModel):
    """One identity an ask was put to: 'received' listings, visibility and wake are indexed queries."""
    ask = pw.BigIntegerField()
    identity = pw.CharField(max_length=50)

    class Meta:
        primary_key = pw.CompositeKey("identity", "ask")


# --- reservations ----------------------------------------------------------------------------

class Reservation(BaseModel):
    """An advisory lock on a named resource (a path, a glob or a service name; domain/reservations.py), held by
    one identity until it is released or `expires_at` passes. `expired_at`: the expiry pass ended it (the row
    stays, for the holder's wake, until the holder releases it or reserves the resource again)."""
    id = pw.AutoField()
    resource = pw.CharField(max_length=500)
    exclusive = pw.BooleanField(default=True)
    holder = pw.CharField(max_length=50)
    reason = pw.TextField(null=True)
    project_id = pw.CharField(max_length=36, null=True)
    ttl_seconds = pw.IntegerField()
    created_at = pw.DateTimeField()
    expires_at = pw.DateTimeField()
    expired_at = pw.DateTimeField(null=True)

    class Meta:
        indexes = (
            (("expired_at", "expires_at"), False),  # live ones and the expiry pass
            (("holder", "expired_at"), False),  # the holder's wake
        )


class DirectoryEntry(BaseModel):
    id = pw.AutoField()  # peewee's implicit key, spelled out so that the type checker knows it
    title = pw.CharField(max_length=255)
    url = pw.CharField(max_length=2000)
    description = pw.TextField(null=True)
    created_by = pw.CharField(max_length=50)
    tagged_users = JSONField(null=True)
    created_at = pw.DateTimeField()


# --- guards (issue 28; domain/guards.py) ------------------------------------------------------

class Guard(BaseModel):
    """A suspected loop among agents: while active (cleared_at null and until not passed) the wake pulses
    and pushes among its members are coalesced to one per member. `scope` names what it watches
    (`mail:a,b` for a pair's mail, `chat:<channel id>` for a channel); one active guard per scope (a
    partial unique index, migrations/v9.py)."""
    id = pw.AutoField()
    kind = pw.CharField(max_length=20)  # mail_loop | chat_loop
    scope = pw.CharField(max_length=120)
    members = pw.CharField(max_length=2000)  # comma-joined, sorted
    channel_id = pw.CharField(max_length=36, null=True)
    messages = pw.IntegerField()  # how many were counted when it tripped
    minutes = pw.IntegerField()  # ... within this many minutes
    tripped_at = pw.DateTimeField()
    until = pw.DateTimeField()
    cleared_at = pw.DateTimeField(null=True)
    cleared_by = pw.CharField(max_length=50, null=True)  # the human who wrote, or null (the cooldown ran out)
    pulsed = pw.CharField(max_length=2000, default="")  # members who had their one pulse while it holds
    pushed = pw.CharField(max_length=2000, default="")  # members who had their one push while it holds


class ChatWake(BaseModel):
    """When a channel last woke an agent member (the chat fan-out guard: at most once per cooldown)."""
    channel = pw.CharField(max_length=36)
    identity = pw.CharField(max_length=50)
    woke_at = pw.DateTimeField()

    class Meta:
        primary_key = pw.CompositeKey("channel", "identity")


ALL_MODELS = [
    SchemaVersion, User, Token, Invite, WebhookConfig, Event, EventTarget, WorkerCursor, PushDelivery, Message,
    ChatChannel, ChatMember, ChatMessage, Project, ProjectTag, Task, TaskEvent, TaskPageLink, RecurringTemplate,
    Workflow, TaskWorkflow,
    BuzzWebhook, BuzzEvent, NotebookPage, NotebookRelay, NotebookReadBase, NotebookVersion,
    NotebookPendingEditor, DirectoryEntry, Ask, AskRecipient, BuzzAlert, BuzzSilence, Guard, ChatWake,
    Reservation, BuzzAlertTally,
]
