# Helpers shared by the dev-stack scripts (stack, nova-stack, glance-stack, keystone-stack,
# neutron-stack, ceph-stack); each
# sources this file after setting REPO, STACK_NAME (its name in messages), NATIVE_RELEASE,
# OPENSTACK_RELEASE and STACK_DIR. Not a script of its own: it defines functions and sets nothing.

log() { printf '%s: %s\n' "$STACK_NAME" "$*" >&2; }
die() { printf '%s: error: %s\n' "$STACK_NAME" "$*" >&2; exit 1; }

# Whether something accepts connections on 127.0.0.1:PORT.
listening() { # port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Whether the release asked for is the one this machine's own packages carry.
native_release() { [ "$OPENSTACK_RELEASE" = "$NATIVE_RELEASE" ]; }

# Runs a command of the release's packages: natively, or inside the release's root.
in_release() {
  if native_release; then env -u PYTHONPATH -u PYTHONHOME "$@"
  else STACK_DIR="$STACK_DIR" bash "$REPO/scripts/release-root" exec "$OPENSTACK_RELEASE" "$@"; fi
}

# Installs the Debian packages that are missing. Package scripts are kept from starting services
# (this may be a machine without an init system, and the keystone package would start its own
# uwsgi on :5000). An install that fails on a stale package index is tried once more after
# `apt-get update`.
apt_install() { # packages...
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "missing packages ${missing[*]}; run as root or install them"
  local made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  log "installing ${missing[*]}"
  local rc=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } \
    || rc=1
  [ "$made_policy" -eq 1 ] && rm -f /usr/sbin/policy-rc.d
  [ "$rc" -eq 0 ] || die "apt-get install ${missing[*]} failed"
}

# The machine's PostgreSQL (127.0.0.1:5432, root, trust auth): whether it answers, and database
# NAME made when missing (scripts/stack's Placement and scripts/nova-stack's cells keep theirs there).
# The machine's PostgreSQL, installed and started where it is not (the node-svc machines have it running).
pg_up() {
  command -v psql >/dev/null || apt_install postgresql-client
  if ! pg_answers; then
    [ -d /etc/postgresql ] || apt_install postgresql
    log "starting the machine's PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start >/dev/null 2>&1 || true
    for _ in $(seq 1 50); do pg_answers && break; sleep 0.2; done
    pg_answers || die "PostgreSQL does not answer on 127.0.0.1:5432 as root with trust auth (pg_ctlcluster --skip-systemctl-redirect \$(ls /etc/postgresql) main start)"
  fi
}
pg_answers() { psql -h 127.0.0.1 -p 5432 -U root -qAt -d postgres -c 'select 1' >/dev/null 2>&1; }
pg_has_db() { [ -n "$(psql -h 127.0.0.1 -p 5432 -U root -v ON_ERROR_STOP=1 -qAt -d postgres -c "select 1 from pg_database where datname = '$1'")" ]; }
pg_ensure_db() { # name
  pg_has_db "$1" || psql -h 127.0.0.1 -p 5432 -U root -v ON_ERROR_STOP=1 -qAt -d postgres -c "create database $1" \
    || die "could not create database $1"
}
# Database NAME, empty: one left by a stack whose state directory is gone (a killed run, a machine
# handed on with PostgreSQL still holding it) is dropped first, since its rows describe services
# that no longer exist (nova-manage refuses to make a cell that such rows already name).
pg_fresh_db() { # name
  if pg_has_db "$1"; then
    log "dropping database $1, left by an earlier run"
    psql -h 127.0.0.1 -p 5432 -U root -v ON_ERROR_STOP=1 -qAt -d postgres -c "drop database $1 with (force)" >/dev/null \
      || die "could not drop the leftover database $1"
  fi
  pg_ensure_db "$1"
}

# ---- daemons under pid files (neutron-stack, ceph-stack) ----

# Whether process PID runs. A killed process its parent has not reaped yet (a zombie) does not:
# `kill -0` alone takes it for alive, and where PID 1 does not reap (some container inits) a
# daemon killed outside its script stays a zombie, so `up` would never start it again.
pid_alive() { # pid
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(sed -E 's/.*\) (.).*/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

pid_file_pid() { # pidfile -> pid of a live process
  [ -s "$1" ] || return 1
  local pid; pid="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$pid" ] && pid_alive "$pid" && echo "$pid"
}

# The process and, where it leads a process group (what spawn starts: setsid), the group: a
# server's workers are its children, and outlive a parent killed before it stopped them.
stop_pidfile() { # pidfile what
  local pid
  if pid="$(pid_file_pid "$1")"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do pid_alive "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    kill -KILL -- "-$pid" 2>/dev/null || true
    log "$2 stopped"
  fi
  rm -f "$1"
}

# Starts a foreground program of the release detached (natively, or in its root), its pid (the
# program's own: every step execs) in pidfile.
spawn() { # pidfile logfile cmd...
  local pidfile="$1" out="$2"; shift 2
  local runner=(env -u PYTHONPATH -u PYTHONHOME)
  native_release || runner=(env STACK_DIR="$STACK_DIR" bash "$REPO/scripts/release-root" exec "$OPENSTACK_RELEASE")
  rm -f "$pidfile"
  setsid bash -c 'echo $$ > "$1"; shift; exec "$@"' _ "$pidfile" "${runner[@]}" "$@" >>"$out" 2>&1 </dev/null &
  for _ in $(seq 1 50); do [ -s "$pidfile" ] && return 0; sleep 0.1; done
}

# Polls CMD until it succeeds; dies after SECONDS naming WHAT (and STACK_LOGS, where the script set it).
wait_for() { # seconds what cmd...
  local secs="$1" what="$2"; shift 2
  for _ in $(seq 1 $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "$what did not come up within $secs s${STACK_LOGS:+ (logs in $STACK_LOGS)}"
}

# ---- a private MariaDB (neutron-stack, cinder-stack) ----

# SQL on the MariaDB of directory DIR (its socket DIR/mysql.sock), as root.
mariadb_sql() { # dir args...
  local d="$1"; shift
  in_release mariadb --no-defaults -S "$d/mysql.sock" -u root "$@"
}

# The release's MariaDB with its data in DIR/mysql, on the unix socket DIR/mysql.sock only
# (--skip-networking: two stacks never meet on a port), started when it is not running, with
# database NAME (utf8mb4) made when missing. Its pid is in DIR/mysql.pid, its logs in DIR/log.
mariadb_up() { # dir name
  local d="$1" name="$2"
  if pid_file_pid "$d/mysql.pid" >/dev/null && mariadb_sql "$d" -e 'select 1' >/dev/null 2>&1; then
    mariadb_sql "$d" -e "create database if not exists $name character set utf8mb4" || die "cannot create database $name"
    return 0
  fi
  mkdir -p "$d/mysql" "$d/log"
  if [ ! -d "$d/mysql/mysql" ]; then
    in_release mariadb-install-db --no-defaults --datadir="$d/mysql" --user=root --auth-root-authentication-method=normal \
      --skip-test-db >"$d/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed: $(tail -3 "$d/log/mariadb-install.log")"
  fi
  # Small buffers: the database holds a few hundred rows.
  spawn "$d/mysql.pid" "$d/log/mariadb.out" mariadbd --no-defaults --user=root --datadir="$d/mysql" \
    --socket="$d/mysql.sock" --skip-networking --log-error="$d/log/mariadb.log" --innodb-buffer-pool-size=16M \
    --innodb-log-buffer-size=4M --aria-pagecache-buffer-size=8M --key-buffer-size=4M --table-open-cache=400 \
    --performance-schema=OFF --skip-log-bin --max-connections=200
  wait_for 60 mariadb mariadb_sql "$d" -e 'select 1'
  mariadb_sql "$d" -e "create database if not exists $name character set utf8mb4" || die "cannot create database $name"
}

# ---- RabbitMQ vhosts (nova-stack, neutron-stack, cinder-stack) ----

# rabbitmqctl against scripts/stack's broker of the release.
rmqctl() { bash "$REPO/scripts/stack" rabbitmqctl "$@"; }

# Vhost NAME, made when missing, with guest allowed everything in it: a stack's own topics.
rabbit_vhost_up() { # name
  rmqctl -q add_vhost "$1" >/dev/null 2>&1 || true
  rmqctl -q set_permissions -p "$1" guest '.*' '.*' '.*' >/dev/null || die "cannot set permissions on vhost $1"
}

rabbit_vhost_down() { # name
  rmqctl -q delete_vhost "$1" >/dev/null 2>&1 || true
}

# ---- `status` lines (neutron-stack, ceph-stack, cinder-stack) ----

# One line: NAME, up or down, DETAIL. A part that is down sets rc=1, the caller's exit status.
status_line() { # name ok(1|0) detail
  if [ "$2" = 1 ]; then printf '%-24s up    %s\n' "$1" "$3"; else printf '%-24s down  %s\n' "$1" "$3"; rc=1; fi
}
# 1 when CMD succeeds, else 0 (for status_line).
up_if() { "$@" >/dev/null 2>&1 && echo 1 || echo 0; }

# ---- TCP relays into a network namespace ----

# 127.0.0.1:PORT of the machine, reachable as 127.0.0.1:PORT inside network namespace NS, whose
# loopback is its own: for each port one socat in the machine's namespace connects each client of
# a unix socket in DIR (a file both namespaces see) to the port, and one in NS listens on its
# 127.0.0.1 at the port and connects to that socket. Nothing binds outside a loopback. LABEL names
# the relay's files (DIR/LABEL-PORT.sock, .pid, -ns.pid, LABEL.out).
ns_relay_up() { # ns dir label ports...
  local ns="$1" d="$2" label="$3" port; shift 3
  command -v socat >/dev/null || apt_install socat
  for port in "$@"; do
    local base="$d/$label-$port"
    pid_file_pid "$base.pid" >/dev/null && pid_file_pid "$base-ns.pid" >/dev/null && continue
    stop_pidfile "$base-ns.pid" "$label relay $port in $ns"; stop_pidfile "$base.pid" "$label relay $port"
    setsid socat UNIX-LISTEN:"$base.sock",fork,unlink-early TCP:127.0.0.1:"$port" </dev/null >>"$d/$label.out" 2>&1 &
    echo $! >"$base.pid"
    setsid nsenter --net="/run/netns/$ns" -- socat TCP-LISTEN:"$port",bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:"$base.sock" </dev/null >>"$d/$label.out" 2>&1 &
    echo $! >"$base-ns.pid"
  done
  for port in "$@"; do
    wait_for 10 "the $label relay of port $port into $ns (see $d/$label.out)" nsenter --net="/run/netns/$ns" -- bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
  done
}

ns_relay_down() { # dir label
  local f
  for f in "$1/$2"-*-ns.pid "$1/$2"-*.pid; do [ -e "$f" ] && stop_pidfile "$f" "$2 relay"; done
  rm -f "$1/$2"-*.sock
}
