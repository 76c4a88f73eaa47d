-- wrk script: GET one path with a bearer token. Set TOKEN in the environment; the path comes from the URL.
local token = os.getenv("TOKEN") or ""
wrk.headers["Authorization"] = "Bearer " .. token
