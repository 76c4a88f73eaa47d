"""Bus channels are named values: every publish, publish_here, subscribe and after_commit in the server
passes a channel declared in coordserver/events/channels.py, and every declared channel is used."""
from __future__ import annotations

import ast
from pathlib import Path

from coordserver.events import channels
from coordserver.events.channels import Channel, ChannelFamily

SOURCE = Path(channels.__file__).resolve().parent.parent
CALLS = {"publish", "publish_here", "subscribe", "after_commit"}
DECLARED = {name: value for name, value in vars(channels).items() if isinstance(value, (Channel, ChannelFamily))}


def _calls():
    """(file, line, the channel argument) of every call of a bus method in the server."""
    for path in sorted(SOURCE.rglob("*.py")):
        if path.parent.name == "events" and path.name in ("bus.py", "channels.py"):
            continue  # the bus itself takes whatever channel it is given
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name == "after_commit" or (name in CALLS and _on_a_bus(node.func)):
                yield path.relative_to(SOURCE.parent), node.lineno, node.args[0]
        yield from _kept_subscriptions(path, tree)


def _kept_subscriptions(path: Path, tree: ast.AST):
    """The channels a cache's `subscriptions()` lists (realtime/kept.py subscribes to each): (channel, callback)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "subscriptions":
            for returned in ast.walk(node):
                if isinstance(returned, ast.Return) and isinstance(returned.value, ast.List):
                    for pair in returned.value.elts:
                        assert isinstance(pair, ast.Tuple), ast.unparse(pair)
                        yield path.relative_to(SOURCE.parent), pair.lineno, pair.elts[0]


def _on_a_bus(func: ast.expr) -> bool:
    """`bus.publish`, `self.coord.bus.subscribe`, ...: a method of a bus (the MCP hub's are not)."""
    return isinstance(func, ast.Attribute) and ast.unparse(func.value).split(".")[-1] == "bus"


def _channel_name(arg: ast.expr) -> str | None:
    """The declared channel an argument names: `WAKE`, `channels.WAKE` or `NOTEBOOK.of(...)`."""
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "of":
        arg = arg.func.value
    if isinstance(arg, ast.Name):
        return arg.id
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "channels":
        return arg.attr
    return None


# Calls whose channel is a variable: they pass on a channel chosen elsewhere (checked there).
PASSED_ON = {("coordserver/app.py", "channel"),
             ("coordserver/realtime/kept.py", "channel")}  # each cache's subscriptions(), scanned above


def test_every_channel_used_is_declared():
    undeclared = []
    for path, line, arg in _calls():
        if isinstance(arg, ast.Constant):
            undeclared.append(f"{path}:{line}: a string channel {arg.value!r}")
            continue
        if isinstance(arg, ast.JoinedStr):
            undeclared.append(f"{path}:{line}: an f-string channel")
            continue
        name = _channel_name(arg)
        if name in DECLARED or (str(path), name) in PASSED_ON:
            continue
        undeclared.append(f"{path}:{line}: {ast.unparse(arg)} is not a channel of events/channels.py")
    assert not undeclared, "\n".join(undeclared)


def test_every_declared_channel_is_used():
    used = {_channel_name(arg) for _path, _line, arg in _calls()}
    # `bus` is published by the bus itself (PostgresBus after a reconnect): count that use too.
    bus_source = (SOURCE / "events" / "bus.py").read_text()
    used |= {name for name in DECLARED if f"{name}.name" in bus_source}
    assert not set(DECLARED) - used, f"declared but never published or subscribed: {sorted(set(DECLARED) - used)}"


def test_channel_names_are_unique():
    names = [value.name if isinstance(value, Channel) else value.prefix for value in DECLARED.values()]
    assert len(names) == len(set(names))
    for value in DECLARED.values():
        assert value.doc, f"{value} says what it carries"


def test_the_list_catches_a_string_channel(tmp_path):
    """The scan sees a string channel where one is written (the check above is not vacuous)."""
    tree = ast.parse('db.after_commit("wake", {})\nbus.subscribe(f"notebook:{x}", cb)')
    found = [node.args[0] for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS]
    assert [type(arg) for arg in found] == [ast.Constant, ast.JoinedStr]
