-- wrk script: POST one MCP JSON-RPC request to /mcp. Set TOKEN and BODY (the request) in the environment,
-- PROTOCOL (MCP-Protocol-Version) and, for a 2025 session, SESSION (Mcp-Session-Id).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("TOKEN") or "")
wrk.headers["MCP-Protocol-Version"] = os.getenv("PROTOCOL") or "2026-07-28"
local session = os.getenv("SESSION") or ""
if session ~= "" then wrk.headers["Mcp-Session-Id"] = session end
local tool = os.getenv("TOOL") or ""
if tool ~= "" then
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = tool
end
wrk.body = os.getenv("BODY") or ""
