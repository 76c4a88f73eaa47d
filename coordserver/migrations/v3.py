"""Schema version 3 (v1.1, API.md §18): project creator and visibility, workflows."""
from __future__ import annotations

import peewee as pw

from ..models import Project, ProjectTag, TaskWorkflow, Workflow
from .ops import add_missing_columns


def upgrade(database: pw.Database) -> None:
    """v1.1 (API.md §18): project creator and visibility, workflows. Existing projects stay open to
    everyone (taggedUsers null) with an unknown creator."""
    add_missing_columns(database, Project, ["created_by", "tagged_users"])
    database.create_tables([ProjectTag, Workflow, TaskWorkflow], safe=True)
