# Sourced by scripts/test-postgres.sh and scripts/bench-postgres.sh (not run on its own): a
# PostgreSQL server with pgvector, and a throwaway cluster on loopback.
#
# pg_install: installs the distribution's PostgreSQL server and its headers if missing (apt-get,
#   through sudo unless root), and builds pgvector from Debian's source package (PGVECTOR_SUITE,
#   default trixie: pgvector 0.8.0) unless the server has it already. The build is kept in
#   .cache/pgvector/ (ignored by git), so a re-run on the same machine only copies it into the
#   server's directories. Sets PG_MAJOR and PG_BIN.
# pg_start_cluster [postgres -c options...]: initdb in a temporary directory, as the `postgres`
#   user when run as root (the server refuses to run as root), starts the server on a free
#   loopback port with the options given, and stops it (and removes the directory) on exit. Sets
#   PG_DATA (the data directory), PG_PORT, PG_URL (a superuser URL of database postgres) and AS_SERVER
#   (the command prefix that runs a program as the server's user).
# pg_install_pooler: installs PgBouncer if missing (sets BOUNCER).
# pg_start_pooler: installs PgBouncer if missing and starts it in front of the cluster, in
#   transaction mode (as managed poolers run it, Neon's among them), on a free loopback port, as the server's
#   user; stopped with the cluster. Sets POOLER_URL (the superuser URL of database postgres through it).
#
# Environment: PG_MAJOR (the server's major version; default the newest installed, else the
# distribution's), PGVECTOR_SUITE, DEBIAN_MIRROR (default the one this machine's apt sources name).
# Expects the working directory to be the checkout's root.

SUDO=()
if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
apt_install() {
  if [ -z "${APT_UPDATED:-}" ]; then
    "${SUDO[@]}" apt-get update -qq
    APT_UPDATED=1
  fi
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

newest_installed() { ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | sed 's|/usr/lib/postgresql/\([0-9]*\)/.*|\1|' | sort -n | tail -1; }

pg_install() {
  # --- The server and its headers -------------------------------------------------------------
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
  local pg_config=$PG_BIN/pg_config ext_dir lib_dir
  ext_dir=$("$pg_config" --sharedir)/extension
  lib_dir=$("$pg_config" --pkglibdir)

  # --- pgvector from Debian's source package --------------------------------------------------
  PGVECTOR_SUITE=${PGVECTOR_SUITE:-trixie}
  local cache=$PWD/.cache/pgvector
  local build=$cache/build-pg$PG_MAJOR-$PGVECTOR_SUITE
  if [ ! -f "$ext_dir/vector.control" ] || [ ! -f "$lib_dir/vector.so" ]; then
    if [ ! -f "$build/vector.so" ]; then
      echo "== building pgvector from Debian's $PGVECTOR_SUITE source package for PostgreSQL $PG_MAJOR"
      local started=$SECONDS
      if [ -z "${DEBIAN_MIRROR:-}" ]; then
        DEBIAN_MIRROR=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep -v -- '-security' | grep -m1 '/debian/\?$' || true)
      fi
      DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian/}
      # A private apt state: one deb-src line, its own lists and cache; the machine's apt
      # configuration and package lists are not touched.
      local apt_dir=$cache/apt
      rm -rf "$apt_dir"
      mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d"
      local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
      echo "deb-src [signed-by=$keyring] $DEBIAN_MIRROR $PGVECTOR_SUITE main" >"$apt_dir/sources.list"
      local apt_opts=(
        -o "Dir::Etc::sourcelist=$apt_dir/sources.list"
        -o "Dir::Etc::sourceparts=$apt_dir/sources.list.d"
        -o "Dir::State::Lists=$apt_dir/lists"
        -o "Dir::Cache=$apt_dir/cache"
        -o "APT::Sandbox::User=$(id -un)"
        -o "Debug::NoLocking=true"
      )
      apt-get "${apt_opts[@]}" update -qq
      rm -rf "$cache/src"
      mkdir -p "$cache/src"
      (cd "$cache/src" && apt-get "${apt_opts[@]}" source -qq pgvector >/dev/null)
      local src
      src=$(find "$cache/src" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -1)
      # OPTFLAGS empty: no -march=native, as Debian builds it (the build is cached).
      make -s -C "$src" -j"$(nproc)" PG_CONFIG="$pg_config" OPTFLAGS="" >/dev/null
      rm -rf "$build"
      mv "$src" "$build"
      rm -rf "$cache/src" "$apt_dir"
      echo "== pgvector built in $((SECONDS - started)) s"
    fi
    echo "== installing pgvector into PostgreSQL $PG_MAJOR"
    "${SUDO[@]}" make -s -C "$build" PG_CONFIG="$pg_config" OPTFLAGS="" install >/dev/null
  fi
}

AS_SERVER=()
if [ "$(id -u)" -eq 0 ]; then AS_SERVER=(runuser -u postgres --); fi

# A loopback port free at the time of asking.
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

stop_cluster() {
  [ -n "${PG_TMP:-}" ] || return 0
  # The server's CPU time (its own and its ended backends'), for the run's cost.
  local pid ticks
  pid=$(head -1 "$PG_DATA/postmaster.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && [ -r "/proc/$pid/stat" ]; then
    ticks=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pid/stat")
    echo "== the server used $((ticks / $(getconf CLK_TCK))) s of CPU"
  fi
  if [ -f "$PG_TMP/pgbouncer.pid" ]; then kill "$(cat "$PG_TMP/pgbouncer.pid")" 2>/dev/null || true; fi
  "${AS_SERVER[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_TMP"
}

# Installs PgBouncer if missing; sets BOUNCER (its path: /usr/sbin is not on every user's PATH).
pg_install_pooler() {
  BOUNCER=$(PATH=$PATH:/usr/sbin command -v pgbouncer || true)
  if [ -z "$BOUNCER" ]; then
    echo "== installing PgBouncer"
    apt_install pgbouncer
    BOUNCER=/usr/sbin/pgbouncer
  fi
}

pg_start_pooler() {
  local port
  pg_install_pooler
  port=$(free_port)
  printf '"postgres" ""\n' >"$PG_TMP/userlist.txt"
  cat >"$PG_TMP/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$PG_PORT
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $PG_TMP/userlist.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 40
logfile = $PG_TMP/pgbouncer.log
pidfile = $PG_TMP/pgbouncer.pid
INI
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$PG_TMP/pgbouncer.ini" "$PG_TMP/userlist.txt"; fi
  "${AS_SERVER[@]}" "$BOUNCER" -d "$PG_TMP/pgbouncer.ini" || {
    cat "$PG_TMP/pgbouncer.log" >&2
    exit 1
  }
  POOLER_URL="postgres://postgres@127.0.0.1:$port/postgres"
  echo "== $("$BOUNCER" --version | head -1) in transaction mode in front of it"
}

pg_start_cluster() {
  PG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/memsvc-pg.XXXXXX")
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$PG_TMP"; fi
  PG_DATA=$PG_TMP/data
  trap stop_cluster EXIT
  trap 'exit 130' INT TERM
  # C.UTF-8: byte order, but lower() and upper() know non-ASCII letters (entity names match
  # case-insensitively, café and CAFÉ); the C locale would fold ASCII only.
  "${AS_SERVER[@]}" "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null
  PG_PORT=$(free_port)
  # The options are kept in PG_OPTIONS so that a restart (bench-postgres.sh) starts it the same way.
  PG_OPTIONS="-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_TMP $*"
  "${AS_SERVER[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_TMP/server.log" -w -t 60 -o "$PG_OPTIONS" start >/dev/null || {
    cat "$PG_TMP/server.log" >&2
    exit 1
  }
  PG_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
  echo "== $("$PG_BIN/psql" -XAtq "$PG_URL" -c 'SELECT version()')"
  echo "== pgvector $("$PG_BIN/psql" -XAtq "$PG_URL" -c "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")"
}
