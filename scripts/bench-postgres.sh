#!/usr/bin/env bash
# `npm run bench:pg -- [--drop-caches] [bench switches]`: `npm run bench` against a real PostgreSQL
# server with pgvector instead of the embedded database (docs/benchmarks.md, "On a PostgreSQL
# server"), e.g. `npm run bench:pg -- --only recall,tenants --facts 1e4`.
#
# - With BENCH_PG_URL set (the URL of a server's maintenance database, e.g.
#   postgres://me@db.example:5432/postgres; it must hold no tables), the bench runs against that
#   server: nothing is installed or started, and recall's "cold" figures are on new connections
#   only (unless BENCH_PG_RESTART is set too: a shell command that restarts that server).
# - Otherwise: installs the server and builds pgvector if missing, starts a throwaway cluster on
#   loopback (scripts/pg-cluster.sh) with the settings below, runs the bench with --database-url
#   and stops the cluster on exit. recall's "cold" figures come after a restart of the cluster
#   (BENCH_PG_RESTART, which the bench runs after closing its connections): shared buffers empty,
#   the OS page cache kept, unless --drop-caches: then `sync; echo 3 > /proc/sys/vm/drop_caches`
#   between the stop and the start (root only; it empties the page cache of the whole machine,
#   every other process's included, so it is never done unless asked for here).
#
# Settings of the throwaway cluster (the rest are the server's defaults, fsync and synchronous
# commit on, as a deployment runs): shared_buffers 1GB (a million facts' tables and indexes are
# about 3 GB: the rest is read through the OS page cache), effective_cache_size 4GB (the
# planner's guess of that cache), max_wal_size 8GB and checkpoint_timeout 30min (a bulk load of
# gigabytes is not cut by checkpoints every 1 GB). BENCH_PG_SHARED_BUFFERS sets another pool size
# (e.g. 4GB: one that holds a million facts). The bench itself sets maintenance_work_mem for its
# index builds (bench/seed.ts).
set -euo pipefail
cd "$(dirname "$0")/.."

DROP_CACHES=0
ARGS=()
for a in "$@"; do
  if [ "$a" = "--drop-caches" ]; then DROP_CACHES=1; else ARGS+=("$a"); fi
done
if [ "$DROP_CACHES" = 1 ] && [ "$(id -u)" -ne 0 ]; then
  echo "--drop-caches: dropping the OS page cache needs root" >&2
  exit 2
fi

if [ -n "${BENCH_PG_URL:-}" ]; then
  if [ "$DROP_CACHES" = 1 ]; then
    echo "--drop-caches: only with the throwaway cluster (BENCH_PG_URL names another server)" >&2
    exit 2
  fi
  exec npm run bench -- --database-url "$BENCH_PG_URL" "${ARGS[@]}"
fi

# shellcheck source=scripts/pg-cluster.sh
. scripts/pg-cluster.sh
pg_install
pg_start_cluster -c "shared_buffers=${BENCH_PG_SHARED_BUFFERS:-1GB}" -c effective_cache_size=4GB -c max_wal_size=8GB -c checkpoint_timeout=30min

ctl="${AS_SERVER[*]} $PG_BIN/pg_ctl -D $PG_DATA -l $PG_TMP/server.log -w -t 120"
restart="$ctl -m fast stop >/dev/null"
if [ "$DROP_CACHES" = 1 ]; then
  restart="$restart && sync && echo 3 > /proc/sys/vm/drop_caches"
  export BENCH_PG_DROPS_CACHES=1
fi
export BENCH_PG_RESTART="$restart && $ctl -o '$PG_OPTIONS' start >/dev/null"

# Not exec: the EXIT trap stops the cluster after the bench.
npm run bench -- --database-url "$PG_URL" "${ARGS[@]}"
