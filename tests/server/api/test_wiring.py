"""The app's parts are typed fields, checked when the app is made: a part left out or of the wrong
kind stops create_app, it does not surface as a KeyError at request time."""
from __future__ import annotations

import dataclasses

import pytest

from coordserver.app import create_app
from coordserver.context import Coord
from coordserver.events.bus import Bus, LocalBus, PostgresBus
from coordserver.services import Services, build
from coordserver.settings import Settings
from tests.helpers import base_env


@pytest.fixture
def app(tmp_path):
    return create_app(Settings.from_env(base_env(f"sqlite:///{tmp_path / 'coord.db'}")))


@pytest.fixture
def coord(app):
    return app.extensions["coord"]


def test_both_buses_are_buses():
    assert isinstance(LocalBus(), Bus) and isinstance(PostgresBus({}), Bus)
    assert not isinstance(object(), Bus)


def test_the_app_is_wired_with_every_part(coord):
    services = coord.services
    assert isinstance(services, Services)
    assert {f.name for f in dataclasses.fields(services)} == {
        "tokens", "tokens_guard", "presence", "loopmon", "wake", "wake_cache", "inbox_cache", "webhooks", "notebook",
        "history", "scheduler",
        "sse", "push", "metrics", "ratelimit", "gate", "mcp", "mcp_endpoint", "asks"}
    assert all(hasattr(part, "start") and hasattr(part, "stop") for part in services.lifecycle())
    with pytest.raises(TypeError):
        services["sse"]  # noqa: B018 (no string lookups any more)


def test_a_part_left_out_or_of_the_wrong_kind_fails_at_startup(app, coord):
    parts = {f.name: getattr(coord.services, f.name) for f in dataclasses.fields(Services)}
    with pytest.raises(TypeError, match="sse"):
        Services(**{**parts, "sse": parts["presence"]})
    missing = dict(parts)
    del missing["gate"]
    with pytest.raises(TypeError, match="gate"):
        Services(**missing)
    assert isinstance(build(coord, app), Services)


def test_a_coord_needs_a_bus(coord):
    with pytest.raises(TypeError, match="Bus"):
        Coord(settings=coord.settings, store=coord.store, bus=object(), clock=coord.clock)
    bare = Coord(settings=coord.settings, store=coord.store, bus=LocalBus(), clock=coord.clock)
    with pytest.raises(AttributeError):
        bare.services  # noqa: B018 (not wired yet: an AttributeError, not a silent empty dict)


# Where `<coord>.services` may be read: the HTTP layer (its handlers reach the typed container) and the
# places that build and run the app. Every other part is handed the parts it uses (services.build).
READ_SERVICES = ("coordserver/api/", "coordserver/app.py", "coordserver/cli.py", "coordserver/services.py")


def test_parts_are_handed_their_dependencies_not_looked_up():
    import ast
    from pathlib import Path

    import coordserver
    root = Path(coordserver.__file__).resolve().parent
    lookups = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root.parent).as_posix()
        if name.startswith(READ_SERVICES):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "services" and isinstance(node.ctx, ast.Load):
                lookups.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not lookups, "parts looking up other parts; pass them in services.build instead:\n" + "\n".join(lookups)
