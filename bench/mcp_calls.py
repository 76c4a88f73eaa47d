"""MCP tool calls per second next to their REST equivalents, in the same run: `wake` (GET /api/wake) and
`send_message` (POST /api/mailboxes/{recipient}/messages), over /mcp in both protocol eras: 2026-07-28
(one self-contained POST per call) and a 2025 session (initialize once, then POSTs with Mcp-Session-Id,
answered as a one-event SSE stream).

Load comes from wrk (`apt-get install -y wrk`), as in bench/messages.py, whose helpers this reuses; every
round runs every case in turn, so the ratios (MCP / REST) are taken under the same machine load. Each wrk
thread holds one connection, and in the session case one session (as an agent's client would).

Against a server you run yourself (rate limits off: COORD_RATE_LIMITS=off):

    python bench/mcp_calls.py --url http://127.0.0.1:8420 --token $TOKEN --recipient bob

Everything local (coordserver serve on a temporary SQLite database, one process):

    python bench/mcp_calls.py --local --rounds 3 --duration 5
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from messages import ROOT, cpu_seconds, free_port, wait_up, wrk  # noqa: E402

MODERN = "2026-07-28"
SESSION_ERA = "2025-11-25"
LOCAL_TOKENS = {"bench": "bench-token-0000000000000000", "sink": "sink-token-00000000000000000"}
SEND = {"title": "Benchmark message", "body": "The quick brown fox jumps over the lazy dog while the deploy runs."}


def tool_call(name: str, arguments: dict, modern: bool) -> str:
    params: dict = {"name": name, "arguments": arguments}
    if modern:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
                           "io.modelcontextprotocol/clientCapabilities": {}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})


def _post(url: str, token: str, body: dict, headers: dict[str, str]) -> tuple[dict, bytes]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}", **headers})
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(response.headers), response.read()


def open_session(base: str, token: str) -> str:
    """A 2025-era session: initialize, then notifications/initialized. Returns its Mcp-Session-Id."""
    headers, _ = _post(f"{base}/mcp", token, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": SESSION_ERA, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}, {})
    session = next(v for k, v in headers.items() if k.lower() == "mcp-session-id")
    _post(f"{base}/mcp", token, {"jsonrpc": "2.0", "method": "notifications/initialized"},
          {"Mcp-Session-Id": session, "MCP-Protocol-Version": SESSION_ERA})
    return session


def check_tool(base: str, token: str, body: str, headers: dict[str, str]) -> None:
    """One call by hand first: wrk counts HTTP 200s, and a refused tool call is a 200 too."""
    _h, raw = _post(f"{base}/mcp", token, json.loads(body), headers)
    text = raw.decode()
    payload = json.loads(text.split("data: ", 1)[1].split("\r\n", 1)[0] if text.startswith("event:") else text)
    assert not payload["result"].get("isError"), payload


def cases(base: str, token: str, recipient: str, sessions: list[str]) -> dict[str, tuple[str, str, dict]]:
    """label -> (url, wrk script, env)."""
    mcp, held = f"{base}/mcp", ",".join(sessions)
    found = {
        "wake REST": (f"{base}/api/wake", "get.lua", {"TOKEN": token}),
        "wake MCP 2026": (mcp, "mcp.lua", {"TOKEN": token, "TOOL": "wake", "PROTOCOL": MODERN,
                                           "BODY": tool_call("wake", {}, True)}),
        "wake MCP session": (mcp, "mcp.lua", {"TOKEN": token, "PROTOCOL": SESSION_ERA, "SESSIONS": held,
                                              "BODY": tool_call("wake", {}, False)}),
        "send REST": (f"{base}/api/mailboxes/{recipient}/messages", "send.lua",
                      {"TOKEN": token, "RECIPIENT": recipient}),
        "send MCP 2026": (mcp, "mcp.lua", {"TOKEN": token, "TOOL": "send_message", "PROTOCOL": MODERN,
                                           "BODY": tool_call("send_message", {"recipient": recipient, **SEND}, True)}),
        "send MCP session": (mcp, "mcp.lua", {"TOKEN": token, "PROTOCOL": SESSION_ERA, "SESSIONS": held,
                                              "BODY": tool_call("send_message", {"recipient": recipient, **SEND},
                                                                False)}),
    }
    for label, (url, script, env) in found.items():
        if script == "mcp.lua":
            headers = {"MCP-Protocol-Version": env["PROTOCOL"]}
            if env.get("SESSIONS"):
                headers["Mcp-Session-Id"] = sessions[0]
            if env.get("TOOL"):
                headers.update({"Mcp-Method": "tools/call", "Mcp-Name": env["TOOL"]})
            check_tool(base, token, env["BODY"], headers)
    return found


def run(base: str, token: str, recipient: str, pid: int | None, args) -> dict:
    table = cases(base, token, recipient, [open_session(base, token) for _ in range(args.connections)])
    samples: dict[str, list[dict]] = {label: [] for label in table}
    for round_ in range(1, args.rounds + 1):
        for label, (url, script, env) in table.items():
            wrk(url, script, env, 1, args.connections, args.connections)  # warm-up
            before = cpu_seconds(pid)
            result = wrk(url, script, env, args.duration, args.connections, args.connections)
            after = cpu_seconds(pid)
            if before is not None and after is not None:
                result["server_cpu_us"] = (after - before) * 1e6 / (result["rps"] * args.duration)
            samples[label].append(result)
            cpu = f"  server CPU {result['server_cpu_us']:6.0f} us/call" if "server_cpu_us" in result else ""
            print(f"  r{round_} {label:<17} {result['rps']:7.0f} calls/s  p50 {result['p50_ms']:6.2f} ms  "
                  f"p99 {result['p99_ms']:6.2f} ms{cpu}  non-2xx {result['non2xx']}", flush=True)
    return report(samples)


def _median(values: list[float]) -> float:
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def report(samples: dict[str, list[dict]]) -> dict:
    """Medians per case, and MCP / REST ratios taken round by round (the same machine load)."""
    summary: dict = {}
    print("--- medians")
    for label, rows in samples.items():
        summary[label] = {key: _median([r[key] for r in rows if key in r]) if any(key in r for r in rows)
                          else None for key in ("rps", "p50_ms", "p99_ms", "server_cpu_us")}
        entry = summary[label]
        cpu = f"  server CPU {entry['server_cpu_us']:6.0f} us/call" if entry["server_cpu_us"] else ""
        print(f"  {label:<17} {entry['rps']:7.0f} calls/s  p99 {entry['p99_ms']:6.2f} ms{cpu}")
    for tool in ("wake", "send"):
        rest = samples[f"{tool} REST"]
        for era in ("2026", "session"):
            label = f"{tool} MCP {era}"
            ratio = _median([m["rps"] / r["rps"] for m, r in zip(samples[label], rest)])
            summary[label]["of_rest"] = ratio
            print(f"  {label:<17} {ratio:4.0%} of REST's calls per second (same rounds)")
    return summary


def local(args) -> dict:
    directory = Path(tempfile.mkdtemp(prefix="coord-bench-mcp-"))
    port = free_port()
    env = {**os.environ, "COORD_DATABASE_URL": f"sqlite:///{directory / 'coord.db'}", "COORD_RATE_LIMITS": "off",
           "COORD_LOG_LEVEL": "warning", "SERVICE_TOKEN_BENCH": LOCAL_TOKENS["bench"],
           "SERVICE_TOKEN_SINK": LOCAL_TOKENS["sink"]}
    log = open(directory / "server.log", "wb")
    process = subprocess.Popen([sys.executable, "-m", "coordserver.cli", "serve", "--port", str(port)], env=env,
                               cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    print(f"server log: {directory / 'server.log'}")
    try:
        base = f"http://127.0.0.1:{port}"
        wait_up(f"{base}/api/health")
        return run(base, LOCAL_TOKENS["bench"], "sink", process.pid, args)
    finally:
        process.terminate()
        process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="base URL of a running server")
    parser.add_argument("--token")
    parser.add_argument("--recipient", default="bob")
    parser.add_argument("--local", action="store_true", help="start coordserver serve on a temporary database")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5, help="seconds per case and round")
    parser.add_argument("--connections", type=int, default=4,
                        help="one wrk thread each; a 2025 client keeps one session per connection")
    parser.add_argument("--json", help="write the summary here")
    args = parser.parse_args()
    if args.local:
        summary = local(args)
    elif args.url and args.token:
        summary = run(args.url.rstrip("/"), args.token, args.recipient, None, args)
    else:
        parser.error("--local, or --url with --token")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
