#!/usr/bin/env bash
# `npm run test:pg`: the suites of vitest.pg.config.ts against a real PostgreSQL server with
# pgvector instead of the embedded database (docs/testing.md, "Against a PostgreSQL server").
#
# - With TEST_PG_URL already set (a superuser URL of a server that has pgvector), the suites run
#   against that server: nothing is installed or started.
# - Otherwise: installs the distribution's PostgreSQL server and its headers if missing (apt-get,
#   through sudo unless root), builds pgvector from Debian's source package (PGVECTOR_SUITE,
#   default trixie: pgvector 0.8.0) unless the server has it already, starts a throwaway cluster
#   on loopback (initdb in a temporary directory, a free port; as the `postgres` user when run as
#   root, since the server refuses to run as root), runs the suites and stops the cluster on exit.
#
# The pgvector build is kept in .cache/pgvector/ (ignored by git), so a re-run on the same machine
# only copies it into the server's directories. Arguments are passed to vitest (a file, -t ...).
# Environment: PG_MAJOR (the server's major version; default the newest installed, else the
# distribution's), PGVECTOR_SUITE, DEBIAN_MIRROR (default the one this machine's apt sources name).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

run_tests() {
  echo "== vitest -c vitest.pg.config.ts against ${TEST_PG_URL%%\?*}"
  npx vitest run -c vitest.pg.config.ts "$@"
}

if [ -n "${TEST_PG_URL:-}" ]; then
  run_tests "$@"
  exit
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
apt_install() {
  if [ -z "${APT_UPDATED:-}" ]; then
    "${SUDO[@]}" apt-get update -qq
    APT_UPDATED=1
  fi
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- The server and its headers ---------------------------------------------------------------
newest_installed() { ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sed 's|/usr/lib/postgresql/\([0-9]*\)/.*|\1|' | sort -n | tail -1; }
PG_MAJOR=${PG_MAJOR:-$(newest_installed)}
if [ -z "$PG_MAJOR" ]; then
  echo "== installing PostgreSQL (the distribution's default version)"
  apt_install postgresql
  PG_MAJOR=$(newest_installed)
fi
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
if [ ! -x "$PG_BIN/postgres" ]; then
  echo "== installing postgresql-$PG_MAJOR"
  apt_install "postgresql-$PG_MAJOR"
fi
if [ ! -f "/usr/include/postgresql/$PG_MAJOR/server/postgres.h" ]; then
  echo "== installing postgresql-server-dev-$PG_MAJOR"
  apt_install "postgresql-server-dev-$PG_MAJOR" make gcc dpkg-dev
fi
PG_CONFIG=$PG_BIN/pg_config
EXT_DIR=$("$PG_CONFIG" --sharedir)/extension
LIB_DIR=$("$PG_CONFIG" --pkglibdir)

# --- pgvector from Debian's source package ----------------------------------------------------
PGVECTOR_SUITE=${PGVECTOR_SUITE:-trixie}
CACHE=$ROOT/.cache/pgvector
BUILD=$CACHE/build-pg$PG_MAJOR-$PGVECTOR_SUITE
if [ ! -f "$EXT_DIR/vector.control" ] || [ ! -f "$LIB_DIR/vector.so" ]; then
  if [ ! -f "$BUILD/vector.so" ]; then
    echo "== building pgvector from Debian's $PGVECTOR_SUITE source package for PostgreSQL $PG_MAJOR"
    started=$SECONDS
    if [ -z "${DEBIAN_MIRROR:-}" ]; then
      DEBIAN_MIRROR=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep -v -- '-security' | grep -m1 '/debian/\?$' || true)
    fi
    DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian/}
    # A private apt state: one deb-src line, its own lists and cache; the machine's apt
    # configuration and package lists are not touched.
    APT_DIR=$CACHE/apt
    rm -rf "$APT_DIR"
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$APT_DIR/sources.list.d"
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    echo "deb-src [signed-by=$keyring] $DEBIAN_MIRROR $PGVECTOR_SUITE main" >"$APT_DIR/sources.list"
    apt_opts=(
      -o "Dir::Etc::sourcelist=$APT_DIR/sources.list"
      -o "Dir::Etc::sourceparts=$APT_DIR/sources.list.d"
      -o "Dir::State::Lists=$APT_DIR/lists"
      -o "Dir::Cache=$APT_DIR/cache"
      -o "APT::Sandbox::User=$(id -un)"
      -o "Debug::NoLocking=true"
    )
    apt-get "${apt_opts[@]}" update -qq
    rm -rf "$CACHE/src"
    mkdir -p "$CACHE/src"
    (cd "$CACHE/src" && apt-get "${apt_opts[@]}" source -qq pgvector >/dev/null)
    src=$(find "$CACHE/src" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -1)
    # OPTFLAGS empty: no -march=native, as Debian builds it (the build is cached).
    make -s -C "$src" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" >/dev/null
    rm -rf "$BUILD"
    mv "$src" "$BUILD"
    rm -rf "$CACHE/src" "$APT_DIR"
    echo "== pgvector built in $((SECONDS - started)) s"
  fi
  echo "== installing pgvector into PostgreSQL $PG_MAJOR"
  "${SUDO[@]}" make -s -C "$BUILD" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" install >/dev/null
fi

# --- A throwaway cluster on loopback ----------------------------------------------------------
AS_SERVER=()
if [ "$(id -u)" -eq 0 ]; then AS_SERVER=(runuser -u postgres --); fi
DATA=$(mktemp -d "${TMPDIR:-/tmp}/memsvc-pg.XXXXXX")
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$DATA"; fi
stop_cluster() {
  # The server's CPU time (its own and its ended backends'), for the run's cost.
  local pid ticks
  pid=$(head -1 "$DATA/data/postmaster.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ]; then
    ticks=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pid/stat")
    echo "== the server used $((ticks / $(getconf CLK_TCK))) s of CPU"
  fi
  "${AS_SERVER[@]}" "$PG_BIN/pg_ctl" -D "$DATA/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$DATA"
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

# C.UTF-8: byte order, but lower() and upper() know non-ASCII letters (entity names match
# case-insensitively, café and CAFÉ); the C locale would fold ASCII only.
"${AS_SERVER[@]}" "$PG_BIN/initdb" -D "$DATA/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null
PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
# The server's defaults otherwise (fsync on): what a deployment runs. More connections than the
# default 100: two test files at a time, each with its pools and its server processes.
"${AS_SERVER[@]}" "$PG_BIN/pg_ctl" -D "$DATA/data" -l "$DATA/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DATA -c max_connections=300" start >/dev/null || {
  cat "$DATA/server.log" >&2
  exit 1
}
export TEST_PG_URL="postgres://postgres@127.0.0.1:$PORT/postgres"
echo "== $("$PG_BIN/psql" -XAtq "$TEST_PG_URL" -c 'SELECT version()')"
echo "== pgvector $("$PG_BIN/psql" -XAtq "$TEST_PG_URL" -c "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")"
run_tests "$@"
