"""Panes, screens and operator actions never call into CoordApp (issue 25): what they reach through `.app` is
Textual's own App (push_screen_wait, notify, focused, ...); what the app should know or do they report up
with a message, and what they read of its state comes from the Session they are given."""
from __future__ import annotations

import ast
from pathlib import Path

from textual.app import App

import coordtui

ROOT = Path(coordtui.__file__).parent
LAYERS = ("panes", "screens", "ops")
# Reached through a protocol of its own, checked with isinstance: a form finds the kept drafts on an app that keeps
# them (screens/form.py KeepsDrafts), identity fields complete on an app that knows the identities (KnowsIdentities),
# and a form works without either in any other app.
THROUGH_A_PROTOCOL = {("screens/form.py", "form_drafts"), ("screens/form.py", "identity_names"),
                      ("screens/form.py", "known_identities")}


def app_members_used() -> set[tuple[str, str]]:
    """(file, name) for every `<anything>.app.<name>` in the panes, screens and operator modules."""
    used = set()
    for layer in LAYERS:
        for path in sorted((ROOT / layer).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                        and node.value.attr == "app":
                    used.add((f"{layer}/{path.name}", node.attr))
    return used


def test_panes_screens_and_ops_use_only_textuals_app():
    textual_app = set(dir(App))
    foreign = sorted((where, name) for where, name in app_members_used() - THROUGH_A_PROTOCOL
                     if name not in textual_app)
    assert not foreign, f"reaching into CoordApp instead of reporting up or reading the Session: {foreign}"


def test_the_walk_sees_app_members():
    assert ("panes/inbox.py", "push_screen_wait") in app_members_used()
