-- wrk script: POST a message per request. Set RECIPIENT and TOKEN in the environment.
local token = os.getenv("TOKEN") or ""
local recipient = os.getenv("RECIPIENT") or "bob"
wrk.method = "POST"
wrk.path = "/api/mailboxes/" .. recipient .. "/messages"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.body = '{"title":"Benchmark message","body":"The quick brown fox jumps over the lazy dog while the deploy runs."}'
