#!/bin/bash
# Runs as root inside the systemd guest (scripts/systemd-guest run), its output read by
# test/integration/systemd/guest.test.ts. The payload disk is mounted at /mnt/payload: src/ (the
# checkout's dist, systemd, config, package files), node_modules/ (production), this script,
# hang-on-usr2.js and compute-agent.conf.
#
# Output, one fact a line: "STEP name", "INFO ...", "PASS check: detail", "FAIL check: detail",
# "COMPUTE_ID uuid" (for the host to delete the provider tree afterwards) and last "RESULT pass" or
# "RESULT fail".
set -u
P=/mnt/payload
UNIT=compute-agent
failed=0
ts() { date -u +%H:%M:%S.%3N; }
step() { echo "[$(ts)] STEP $*"; }
info() { echo "[$(ts)] INFO $*"; }
pass() { echo "[$(ts)] PASS $1: ${2:-}"; }
fail() { echo "[$(ts)] FAIL $1: ${2:-}"; failed=1; }
show() { systemctl show -p "$1" --value "$UNIT"; }
# Both in one call: two calls could straddle a transition and pair states that never coexisted.
state() { systemctl show -p ActiveState -p SubState "$UNIT" | sed -n 's/^ActiveState=//p; s/^SubState=//p' | paste -sd/; }
# The agent's own JSON lines from one process, as journald stored them.
agent_log() { journalctl -q -u "$UNIT" -o cat "_PID=$1"; }
# wait_for SECONDS COMMAND...: polls every 0.2 s.
wait_for() {
  local until=$(( $(date +%s) + $1 )); shift
  until "$@"; do [ "$(date +%s)" -ge "$until" ] && return 1; sleep 0.2; done
}
logged() { agent_log "$1" | grep -qF "\"msg\":\"$2\""; }
finish() {
  info "journal of $UNIT (last 60 lines):"
  journalctl -q -u "$UNIT" -o short-precise --no-pager | tail -n 60 | sed 's/^/  | /'
  [ "$failed" -eq 0 ] && echo "RESULT pass" || echo "RESULT fail"
  exit 0
}

step "install: systemd/install.sh under a running systemd"
info "systemd $(systemctl --version | head -n1 | cut -d' ' -f2), kernel $(uname -r), node $(node --version)"
cp -a "$P/src" /usr/src/compute-agent
# The production modules, built on the host for this lock file: install.sh keeps them when the
# recorded lock matches, as it does on an upgrade, so the guest needs no registry.
mkdir -p /opt/compute-agent
cp -a "$P/node_modules" /opt/compute-agent/node_modules
cp /usr/src/compute-agent/package-lock.json /opt/compute-agent/.installed-lock
if bash /usr/src/compute-agent/systemd/install.sh --no-build; then pass install "install.sh exited 0"; else fail install "install.sh failed"; finish; fi
install -m 0640 -o root -g compute-agent "$P/compute-agent.conf" /etc/compute-agent/compute-agent.conf
gpu_dropin=/etc/systemd/system/$UNIT.service.d/gpu-devices.conf
if [ -e /dev/dri/card0 ]; then
  if [ -f "$gpu_dropin" ]; then pass gpu-dropin "install.sh saw /dev/dri and wrote $gpu_dropin"; else fail gpu-dropin "/dev/dri present but no $gpu_dropin"; fi
else
  info "no /dev/dri in this guest: the GPU drop-in is not exercised"
fi
install -D -m 0644 "$P/hang-on-usr2.js" /usr/local/lib/compute-agent-test/hang-on-usr2.js
# Test-only drop-in: a shorter watchdog and the hang hook; everything else is the shipped unit.
mkdir -p /etc/systemd/system/$UNIT.service.d
cat >/etc/systemd/system/$UNIT.service.d/zz-guest-test.conf <<EOF
[Service]
WatchdogSec=30s
RestartSec=1s
Environment="NODE_OPTIONS=--max-semi-space-size=1 --require /usr/local/lib/compute-agent-test/hang-on-usr2.js"
EOF
systemctl daemon-reload
# Enabled, as an operator runs it: the unit also stays loaded when stopped, so its exit status
# can be read afterwards.
systemctl enable "$UNIT" 2>&1 | sed 's/^/  /'
info "$(systemd-analyze security "$UNIT" 2>/dev/null | tail -n1)"

step "start: Type=notify, active only after READY=1"
seen=""
systemctl start --no-block "$UNIT"
t0=$(date +%s%3N)
deadline=$(( $(date +%s) + 300 ))
while :; do
  s=$(state)
  case " $seen " in *" $s "*) ;; *) seen="$seen $s"; info "state $s at +$(( $(date +%s%3N) - t0 )) ms" ;; esac
  [ "$s" = active/running ] && break
  case "$s" in failed/*) break ;; inactive/*) [[ "$seen" == *activating* ]] && break ;; esac
  [ "$(date +%s)" -ge "$deadline" ] && break
  sleep 0.2
done
pid=$(show MainPID)
status_text=$(show StatusText)
if [ "$(state)" = active/running ] && [[ "$seen" == *activating/start* ]] && logged "$pid" "Placement synced" && logged "$pid" "broker connected"; then
  pass ready "READY=1 received after $(( $(date +%s%3N) - t0 )) ms; states seen:${seen}; Placement synced and broker connected before active; StatusText=\"$status_text\""
else
  fail ready "state $(state), seen:${seen}; StatusText=\"$status_text\""
  finish
fi
if [[ "$status_text" == *"consuming compute."* ]]; then pass status-text "$status_text"; else fail status-text "$status_text"; fi
echo "COMPUTE_ID $(cat /var/lib/compute-agent/compute_id 2>/dev/null)"

step "journald: the agent's lines are JSON in MESSAGE"
wait_for 60 logged "$pid" "compute-agent up" || true
entry=$(journalctl -q -u "$UNIT" -o json "_PID=$pid" | node -e '
  const lines = require("fs").readFileSync(0, "utf8").trim().split("\n");
  for (const l of lines) {
    const e = JSON.parse(l);
    let m; try { m = JSON.parse(e.MESSAGE); } catch { continue; }
    if (m.msg === "compute-agent up") { console.log(JSON.stringify({ SYSLOG_IDENTIFIER: e.SYSLOG_IDENTIFIER, PRIORITY: e.PRIORITY, _PID: e._PID, MESSAGE: m })); process.exit(0); }
  }
  process.exit(1);')
if [ -n "$entry" ]; then pass journald-json "$entry"; else fail journald-json "no JSON MESSAGE with msg \"compute-agent up\""; fi

step "sandbox: discovery as the service user, under the unit's own sandbox"
props=()
while IFS= read -r line; do props+=(-p "$line"); done < <(
  sed -n '/^# --- Sandboxing/,/^\[Install\]/p' /etc/systemd/system/$UNIT.service | grep -E '^[A-Za-z]+='
  [ -f "$gpu_dropin" ] && grep -E '^[A-Za-z]+=' "$gpu_dropin")
info "systemd-run with ${#props[@]} sandbox properties from the installed unit"
# sandboxed_as USER COMMAND...: one transient service with the unit's sandbox.
sandboxed_as() { local u=$1; shift; systemd-run --quiet --wait --pipe --collect -p User="$u" -p Group="$u" "${props[@]}" "$@"; }
sandboxed() { sandboxed_as compute-agent "$@"; }
conf=(--config-file /etc/compute-agent/compute-agent.conf)
sandboxed /usr/local/bin/compute-agent discover --facts "${conf[@]}" >/tmp/facts-sandboxed.json 2>/tmp/facts-sandboxed.err
rc_s=$?
/usr/local/bin/compute-agent discover --facts "${conf[@]}" >/tmp/facts-root.json 2>/tmp/facts-root.err
cmp_out=$(node -e '
  const fs = require("fs");
  const a = JSON.parse(fs.readFileSync("/tmp/facts-root.json", "utf8"));
  const b = JSON.parse(fs.readFileSync("/tmp/facts-sandboxed.json", "utf8"));
  // Probe durations (ms) and free memory move between two runs; everything else must be the same.
  const volatile = new Set(["ms", "free_mb", "available_mb", "free", "available", "uptime", "uptime_s"]);
  const diff = [];
  const walk = (x, y, path) => {
    if (x && typeof x === "object" && y && typeof y === "object") {
      for (const k of new Set([...Object.keys(x), ...Object.keys(y)])) if (!volatile.has(k)) walk(x[k], y[k], `${path}.${k}`);
    } else if (JSON.stringify(x) !== JSON.stringify(y)) diff.push(`${path}: root ${JSON.stringify(x)} sandboxed ${JSON.stringify(y)}`);
  };
  walk(a, b, "facts");
  console.log(diff.length ? diff.join("; ") : `same facts (${Object.keys(a).join(", ")})`);
  process.exit(diff.length ? 1 : 0);' 2>&1)
rc_c=$?
if [ "$rc_s" -eq 0 ] && [ "$rc_c" -eq 0 ] && ! grep -qi warn /tmp/facts-sandboxed.err; then
  pass sandbox-discover "exit 0, no probe warnings, $cmp_out"
else
  fail sandbox-discover "exit $rc_s; $cmp_out; stderr: $(head -c 600 /tmp/facts-sandboxed.err)"
fi
if [ -e /dev/dri/card0 ] && [ -f "$gpu_dropin" ]; then
  # The device cgroup is what the drop-in opens; file modes are the site's (card* and renderD* are
  # root-owned 0660 on Debian). So the node is opened by root without capabilities under the same
  # sandbox: EPERM would be the cgroup refusing, ENOENT the private /dev hiding it.
  node=$(ls /dev/dri/renderD* /dev/dri/card* 2>/dev/null | head -n1)
  got=$(sandboxed_as root /bin/sh -c "exec 3<>$node && echo opened $node" 2>&1)
  base=("${props[@]}")
  props=()
  while IFS= read -r line; do props+=(-p "$line"); done < <(sed -n '/^# --- Sandboxing/,/^\[Install\]/p' /etc/systemd/system/$UNIT.service | grep -E '^[A-Za-z]+=')
  without=$(sandboxed_as root /bin/sh -c 'ls /dev/dri 2>&1' 2>&1)
  props=("${base[@]}")
  if [[ "$got" == opened* ]] && [[ "$without" == *"No such file"* ]]; then
    pass sandbox-gpu "with the drop-in: $got; the base unit alone: $without"
  else
    fail sandbox-gpu "with the drop-in: $got; the base unit alone: $without"
  fi
fi

step "reload: systemctl reload sends SIGHUP, the same process reloads"
systemctl reload "$UNIT"
if wait_for 30 logged "$pid" "configuration reloaded; Placement cache cleared" && [ "$(show MainPID)" = "$pid" ] && [ "$(state)" = active/running ]; then
  pass reload "pid $pid logged \"configuration reloaded; Placement cache cleared\" and stayed active/running"
else
  fail reload "no reload line from pid $pid; state $(state), MainPID $(show MainPID)"
fi

step "watchdog: a hung event loop gets the service killed and restarted"
restarts=$(show NRestarts)
since=$(date '+%Y-%m-%d %H:%M:%S')
kill -USR2 "$pid"
t0=$(date +%s%3N)
new_pid_active() { local p; p=$(show MainPID); [ "$p" != 0 ] && [ "$p" != "$pid" ] && [ "$(state)" = active/running ]; }
if wait_for 240 new_pid_active; then
  new_pid=$(show MainPID)
  timeout_line=$(journalctl -q -u "$UNIT" --since "$since" -o cat | grep -m1 -i 'watchdog timeout')
  if [ -n "$timeout_line" ] && [ "$(show NRestarts)" -gt "$restarts" ]; then
    pass watchdog-restart "hung pid $pid; systemd: \"$timeout_line\"; restarted as pid $new_pid, READY again after $(( $(date +%s%3N) - t0 )) ms, NRestarts $restarts -> $(show NRestarts)"
  else
    fail watchdog-restart "restarted as $new_pid but journal line \"$timeout_line\", NRestarts $(show NRestarts)"
  fi
  pid=$new_pid
else
  fail watchdog-restart "not restarted: state $(state), MainPID $(show MainPID)"
fi

step "stop: SIGTERM, a clean exit well inside TimeoutStopSec"
limit=$(show TimeoutStopUSec)
since=$(date '+%Y-%m-%d %H:%M:%S')
t0=$(date +%s%3N)
systemctl stop "$UNIT"
took=$(( $(date +%s%3N) - t0 ))
result=$(show Result); code=$(show ExecMainCode); status=$(show ExecMainStatus)
deactivated=$(journalctl -q -u "$UNIT" --since "$since" -o cat | grep -m1 -E 'Deactivated successfully|Failed with result|timed out')
# ExecMainCode 1 is CLD_EXITED: the process exited by itself rather than by a signal.
if [ "$result" = success ] && [ "$code" = 1 ] && [ "$status" = 0 ] && logged "$pid" "compute-agent stopped" &&
  [[ "$deactivated" == *"Deactivated successfully"* ]]; then
  pass clean-stop "stopped in $took ms (TimeoutStopSec $limit); pid $pid logged \"compute-agent stopped\", exited with status 0; systemd: \"$deactivated\""
else
  fail clean-stop "took $took ms; Result=$result ExecMainCode=$code ExecMainStatus=$status; systemd: \"$deactivated\""
fi
finish
