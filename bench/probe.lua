-- wrk script: POST a small JSON body with a bearer token (bench/core_probe.py routes). Set TOKEN.
local token = os.getenv("TOKEN") or ""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.body = '{"title":"Benchmark message","body":"The quick brown fox jumps over the lazy dog while the deploy runs."}'
