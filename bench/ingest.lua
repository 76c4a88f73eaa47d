-- wrk script: POST an Alertmanager-like firing to an ingest URL (the path comes from the URL; no token needed).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"title":"Disk almost full on db-1","body":"92% used on /var/lib/postgresql, rising 1% an hour."}'
