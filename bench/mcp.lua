-- wrk script: POST one MCP JSON-RPC request to /mcp. Set TOKEN and BODY (the request) in the environment,
-- PROTOCOL (MCP-Protocol-Version), TOOL (the Mcp-Name header of a 2026-07-28 call) and, for 2025 sessions,
-- SESSIONS: comma-separated Mcp-Session-Ids, one per wrk thread (run one connection per thread).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("TOKEN") or "")
wrk.headers["MCP-Protocol-Version"] = os.getenv("PROTOCOL") or "2026-07-28"
local tool = os.getenv("TOOL") or ""
if tool ~= "" then
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = tool
end
wrk.body = os.getenv("BODY") or ""

local sessions = {}
for id in string.gmatch(os.getenv("SESSIONS") or "", "[^,]+") do table.insert(sessions, id) end
local threads = 0

function setup(thread)
  if #sessions > 0 then
    thread:set("session", sessions[threads % #sessions + 1])
    threads = threads + 1
  end
end

function init(args)
  if session then wrk.headers["Mcp-Session-Id"] = session end
end
