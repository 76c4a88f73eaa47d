#!/usr/bin/env bash
# Mutation testing of one module against the fast tests that hold its rules (issue 35).
#
#   pip install -e '.[mutation]'
#   scripts/mutation.sh coordserver/netcheck.py      # a module of either package: TESTS below lists them
#   scripts/mutation.sh coordtui/client/models.py
#
# mutmut 3 runs in a scratch copy of the working tree (the tracked and new files, not .venv or data),
# so the checkout is never touched and any module can be run without editing pyproject.toml. It prints
# the score and every surviving mutant with its diff; `cd $MUTATION_DIR && mutmut browse` explores them
# (MUTATION_DIR defaults to /tmp/coord-mutation-<module>).
# Not part of the normal pytest run. MUTATION_JOBS (default 1) caps mutmut's parallel children: the
# server tests start real servers. A module not in TESTS below needs MUTATION_TESTS="tests/... ...".
# MUTATION_ONLY="glob ..." runs only the mutants whose names match (mutmut's names, e.g.
# 'coordserver.domain.buzz.x__ingest_many__mutmut_*'; methods are 'coordserver.domain.buzz.xǁ_BatchǁNAME__mutmut_*').
set -euo pipefail

arg="${1:?usage: scripts/mutation.sh coordserver/<module>.py | coordtui/<module>.py}"
arg="${arg%.py}"
case "$arg" in coordserver/*|coordtui/*) path="$arg.py" ;; *) path="coordserver/$arg.py" ;; esac
package="${path%%/*}"
module="${path%.py}"; module="${module#coordserver/}"  # TESTS' key: coordserver's modules without the package
root="$(cd "$(dirname "$0")/.." && pwd)"
command -v mutmut >/dev/null || { echo "no mutmut: activate the venv; pip install -e '.[mutation]'" >&2; exit 2; }
[[ -f "$root/$path" ]] || { echo "no such module: $path" >&2; exit 2; }

# The tests that hold each module's rules: the fastest selection that exercises them.
declare -A TESTS=(
  [netcheck]="tests/server/test_netcheck.py tests/server/realtime/test_webhook_targets.py"
  [ratelimit]="tests/server/test_ratelimit.py"
  [domain/task_rules]="tests/server/api/test_swarm.py tests/server/api/test_task_rules.py"
  [domain/visibility]="tests/server/api/test_directory.py tests/server/api/test_workflows.py"
  [events/log]="tests/server/events/test_log.py tests/server/realtime/test_resume_audiences.py
    tests/server/realtime/test_stream.py"
  [gate]="tests/server/test_gate.py"
  [auth]="tests/server/test_auth_tokens.py tests/server/api/test_auth.py"
  [domain/identities]="tests/server/domain/test_rules_identities.py tests/server/domain/test_rules_users.py"
  [domain/users]="tests/server/domain/test_rules_users.py tests/server/domain/test_rules_profiles.py"
  [domain/fields]="tests/server/domain/test_fields_and_fulltext.py"
  [domain/fulltext]="tests/server/domain/test_fields_and_fulltext.py"
  [domain/project_access]="tests/server/domain/test_rules_project_access.py"
  [domain/projects]="tests/server/domain/test_rules_project_access.py tests/server/domain/test_rules_projects.py"
  [domain/directory]="tests/server/domain/test_rules_directory.py"
  [domain/wake_chat]="tests/server/domain/test_rules_wake_chat.py tests/server/api/test_chat_wake.py"
  [domain/asks]="tests/server/domain/test_rules_asks.py"
  [domain/silences]="tests/server/domain/test_rules_silences.py"
  [domain/lookalike]="tests/server/domain/test_rules_lookalike.py"
  [domain/workflows]="tests/server/domain/test_rules_workflows.py"
  [domain/resource_globs]="tests/server/domain/test_resource_globs.py"
  [domain/leases]="tests/server/domain/test_rules_leases.py"
  [domain/lease_changes]="tests/server/domain/test_rules_leases.py"
  [domain/reservations]="tests/server/domain/test_rules_reservations.py"
  [domain/messages]="tests/server/domain/test_rules_messages.py tests/server/domain/test_rules_mailbox.py
    tests/server/domain/test_rules_guards.py"
  [domain/chat]="tests/server/domain/test_rules_chat.py tests/server/domain/test_rules_guards.py"
  [domain/swarm]="tests/server/domain/test_rules_swarm.py tests/server/domain/test_rules_leases.py"
  [domain/buzz]="tests/server/domain/test_rules_buzz.py tests/server/domain/test_rules_buzz_merged.py"
  [domain/alerts]="tests/server/domain/test_rules_alerts.py tests/server/domain/test_rules_buzz.py"
  [domain/wake]="tests/server/domain/test_rules_wake.py"
  [domain/notebook_versions]="tests/server/domain/test_rules_notebook_versions.py"
  [domain/recurring]="tests/server/domain/test_rules_recurring.py"
  [domain/notebook]="tests/server/domain/test_rules_notebook.py"
  [domain/doctor]="tests/server/domain/test_doctor_verdicts.py"
  [domain/guards]="tests/server/domain/test_rules_guards.py"
  [domain/kinds]="tests/server/domain/test_rules_kinds.py"
  [domain/wake_signal]="tests/server/domain/test_rules_kinds.py"
  [coordtui/client/models]="tests/tui/unit/test_models.py tests/tui/unit/test_pure_functions.py"
  [coordtui/client/ops_models]="tests/tui/unit/test_models.py"
  [coordtui/client/transitions]="tests/tui/unit/test_pure_functions.py"
  [coordtui/client/safe_text]="tests/test_terminal_text.py"
  [coordtui/client/v11]="tests/tui/unit/test_v11_models.py"
)
tests="${MUTATION_TESTS:-${TESTS[$module]:-}}"
[[ -n "$tests" ]] || { echo "no test selection for $module: set MUTATION_TESTS" >&2; exit 2; }

work="${MUTATION_DIR:-${TMPDIR:-/tmp}/coord-mutation-${module//\//-}}"
mkdir -p "$work"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -xf - -C "$work"
cd "$work"
rm -rf setup.cfg mutants  # a fresh run: results cached from other tests or code would mislead
{
  echo "[mutmut]"
  echo "source_paths=$package"
  echo "only_mutate=$path"
  echo "also_copy="
  for extra in tests pyproject.toml; do echo "    $extra"; done
  echo "pytest_add_cli_args=-n 0 -p no:randomly -p no:cacheprovider -q"
  echo "pytest_add_cli_args_test_selection="
  for t in $tests; do echo "    $t"; done
} > setup.cfg
# pyproject.toml's [tool.mutmut] would win over setup.cfg: keep the project's file free of one.
python - <<'EOF'
import tomllib, pathlib
assert "mutmut" not in tomllib.loads(pathlib.Path("pyproject.toml").read_text()).get("tool", {})
EOF

# One PostgreSQL cluster for the whole run: mutmut runs pytest afresh for every mutant, and a cluster of
# its own per mutant (initdb and start, ~0.9 s) was a third of a domain mutant's time.
cluster="$(python -c 'from tests.pg import PostgresCluster; print(PostgresCluster().start().describe())')"
export COORD_TEST_PG_CLUSTER="$cluster"
trap 'python -c "from tests.pg import PostgresCluster; PostgresCluster(\"$cluster\", owned=True).stop()"' EXIT

# mutmut 3.8 has exited non-zero after a complete run (events/log, with every mutant judged): a run is
# judged by mutmut's closing line, not by its exit status.
# shellcheck disable=SC2086  # MUTATION_ONLY's globs are words, matched by mutmut, not by the shell
set -f; mutmut run --max-children "${MUTATION_JOBS:-1}" ${MUTATION_ONLY:-} >mutmut-run.log 2>&1 || true; set +f
grep -q "mutations/second" mutmut-run.log || { tail -40 mutmut-run.log; exit 1; }
mutmut export-cicd-stats >/dev/null
python - "$path" <<'EOF'
import json, pathlib, sys
stats = json.loads(pathlib.Path("mutants/mutmut-cicd-stats.json").read_text())
killed, survived = stats["killed"], stats["survived"]
other = {k: v for k, v in stats.items() if k not in ("killed", "survived", "total") and v}
tested = killed + survived
print(f"{sys.argv[1]}: {killed} killed, {survived} survived of {tested} tested mutants"
      f" ({100 * killed / max(tested, 1):.1f} %){'; ' + str(other) if other else ''}")
EOF
for name in $(mutmut results 2>/dev/null | awk -F: '/: survived/{gsub(/ /, "", $1); print $1}'); do
  echo "--- survived: $name"; mutmut show "$name" | sed -n '/^@@/,$p'
done
