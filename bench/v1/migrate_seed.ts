// Applies v1's drizzle/*.sql as v1's src/lib/migrate.ts does at startup (same _hive_migrations table,
// statements split on ";"; four fresh-database workarounds below), then seeds benchmark identities (users + mailbox_tokens rows).
// Env: PG* as v1 reads them; BENCH_TOKENS="name:token,name:token".
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import postgres from "postgres";

const sql = postgres({
  host: process.env.PGHOST || "localhost", port: Number(process.env.PGPORT || 5432),
  user: process.env.PGUSER || "postgres", password: process.env.PGPASSWORD || "",
  database: process.env.PGDATABASE_TEAM || process.env.PGDATABASE || "postgres", max: 1, onnotice: () => {},
});
try {
  await sql`CREATE TABLE IF NOT EXISTS _hive_migrations (id serial PRIMARY KEY,
    filename text NOT NULL UNIQUE, applied_at timestamptz NOT NULL DEFAULT now())`;
  const dir = join(process.cwd(), "drizzle");
  const files = (await readdir(dir)).filter((f) => f.endsWith(".sql") && !f.startsWith("_")).sort();
  const applied = new Set((await sql`SELECT filename FROM _hive_migrations`).map((r: any) => r.filename));
  const statements = async (file: string) =>
    (await readFile(join(dir, file), "utf8")).replace(/--[^\n]*/g, "").split(";").map((s) => s.trim()).filter(Boolean);
  // 3. v1's migrate.ts splits on ";" before stripping "--" comments, so 0007 (a ";" inside a comment) fails
  //    there with: syntax error at or near "non". Here comments are stripped first (otherwise identical).
  // Fresh-database workarounds (v1's migrations assume its production database):
  // 1. 0002/0003/0010 GRANT to role team_user (the container's role): create it, NOLOGIN.
  await sql.unsafe(`DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'team_user')
                    THEN CREATE ROLE team_user NOLOGIN; END IF; END $$`);
  // 2. 0002 alters notebook_pages, which only 0006 creates (CREATE TABLE IF NOT EXISTS, idempotent):
  //    run 0006's statements just before 0002; 0006 runs again, as a no-op, in its turn.
  let ran = 0;
  for (const file of files) {
    if (applied.has(file)) continue;
    if (file.startsWith("0002_")) {
      const [{ reg }] = await sql`SELECT to_regclass('public.notebook_pages') AS reg`;
      const early = files.find((f) => f.startsWith("0006_"));
      if (!reg && early) for (const stmt of await statements(early)) await sql.unsafe(stmt);
    }
    for (const stmt of await statements(file)) {
      await sql.unsafe(stmt);
    }
    await sql`INSERT INTO _hive_migrations (filename) VALUES (${file})`;
    ran++;
  }
  // 4. schema.ts has chat_members.archived_at (per-member soft delete) but no migration adds it (the
  //    production database got it by db:push): add it as schema.ts declares it.
  await sql`ALTER TABLE chat_members ADD COLUMN IF NOT EXISTS archived_at timestamp with time zone`;
  console.log(`[migrate_seed] ${ran} migration(s) applied, ${files.length} in drizzle/`);
  for (const pair of (process.env.BENCH_TOKENS || "").split(",").filter(Boolean)) {
    const [name, token] = pair.split(":");
    await sql`INSERT INTO users (id, display_name, is_admin, is_agent) VALUES (${name}, ${name}, false, true)
              ON CONFLICT (id) DO NOTHING`;
    await sql`INSERT INTO mailbox_tokens (token, identity, label, created_by) VALUES (${token}, ${name}, 'bench', 'run_v1.sh')
              ON CONFLICT (token) DO NOTHING`;
    console.log(`[migrate_seed] identity ${name} has token ${token}`);
  }
} finally {
  await sql.end();
}
