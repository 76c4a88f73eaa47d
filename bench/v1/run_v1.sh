#!/usr/bin/env bash
# Migrate a PostgreSQL database for the v1 server (BigInformatics/hive) and run it in the foreground, as its
# container image does (NODE_ENV=production, `bun run .output/server/index.mjs` from the app directory), with the
# benchmark identities of bench/scale.py. Building it: bench/v1/README.md.
#
#   bench/v1/run_v1.sh postgresql://user[:pass]@host:port/dbname PORT
#
# V1_SRC: the built v1 tree (default /tmp/v1/src); BUN: the bun binary (default: bun on PATH).
# HIVE_RATE_LIMIT: off by default here (rate-limit-switch.patch); "on" is v1's production limiter.
# BROADCAST_ALERT_COOLDOWN_MINUTES: v1's ingest dedup window (unset: 180, an identical body is answered
# suppressed:true and not stored; 0 stores every ingest, as coordserver does without a dedupKey).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 POSTGRES_URL PORT" >&2; exit 2; }
URL=$1 PORT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
APP=${V1_SRC:-/tmp/v1/src}
BUN=${BUN:-$(command -v bun || true)}
[ -x "$BUN" ] || { echo "no bun: set BUN (bench/v1/README.md)" >&2; exit 1; }
[ -f "$APP/.output/server/index.mjs" ] || { echo "no build in $APP: bench/v1/README.md" >&2; exit 1; }

# v1 reads PGHOST/PGPORT/PGUSER/PGPASSWORD/PGDATABASE_TEAM, not a URL.
eval "$(python3 - "$URL" <<'PY'
import shlex, sys
from urllib.parse import unquote, urlsplit
u = urlsplit(sys.argv[1])
for key, value in {"PGHOST": u.hostname or "localhost", "PGPORT": u.port or 5432, "PGUSER": unquote(u.username or "postgres"),
                   "PGPASSWORD": unquote(u.password or ""), "PGDATABASE_TEAM": u.path.lstrip("/") or "postgres"}.items():
    print(f"export {key}={shlex.quote(str(value))}")
PY
)"
unset HIVE_PGHOST PGHOST_DATA PGDATABASE DATABASE_URL

export BENCH_TOKENS="bench:bench-token-0000000000000000,sink:sink-token-00000000000000000,reader:reader-token-000000000000000,alice:alice-token-00000000000000000,bob:bob-token-000000000000000000"
cd "$APP"  # v1 finds drizzle/ relative to its working directory (/app in the image); the seed imports its `postgres`
cp "$HERE/migrate_seed.ts" "$APP/.bench_migrate_seed.ts"
"$BUN" run "$APP/.bench_migrate_seed.ts"

export NODE_ENV=production PORT HOST=${HOST:-127.0.0.1}
export SUPERUSER_TOKEN=admin-token-0000000000000000 SUPERUSER_NAME=admin
export HIVE_BASE_URL="http://127.0.0.1:$PORT"
export HIVE_RATE_LIMIT=${HIVE_RATE_LIMIT:-off}
exec "$BUN" run .output/server/index.mjs
