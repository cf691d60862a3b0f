#!/usr/bin/env bash
# `npm run test:pg`: the suites of vitest.pg.config.ts against a real PostgreSQL server with
# pgvector instead of the embedded database (docs/testing.md, "Against a PostgreSQL server").
#
# - With TEST_PG_URL already set (a superuser URL of a server that has pgvector), the suites run
#   against that server: nothing is installed or started.
# - Otherwise: installs the server and builds pgvector if missing, starts a throwaway cluster on
#   loopback (scripts/pg-cluster.sh), runs the suites and stops the cluster on exit.
#
# Arguments are passed to vitest (a file, -t ...). Environment: PG_MAJOR, PGVECTOR_SUITE,
# DEBIAN_MIRROR (scripts/pg-cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

run_tests() {
  echo "== vitest -c vitest.pg.config.ts against ${TEST_PG_URL%%\?*}"
  npx vitest run -c vitest.pg.config.ts "$@"
}

if [ -n "${TEST_PG_URL:-}" ]; then
  run_tests "$@"
  exit
fi

# shellcheck source=scripts/pg-cluster.sh
. scripts/pg-cluster.sh
pg_install
# The server's defaults otherwise (fsync on): what a deployment runs. More connections than the
# default 100: two test files at a time, each with its pools and its server processes.
pg_start_cluster -c max_connections=300
export TEST_PG_URL=$PG_URL
# PgBouncer in front of it (tests/db/pooler.test.ts): what managed Postgres services put in front of their servers.
pg_start_pooler
export TEST_PGBOUNCER_URL=$POOLER_URL
run_tests "$@"
