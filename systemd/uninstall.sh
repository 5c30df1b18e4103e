#!/usr/bin/env bash
# Removes what install.sh added. Configuration (/etc/compute-agent), state (/var/lib/compute-agent)
# and the service account are kept unless --purge is given.
#
#   systemd/uninstall.sh [--root DIR] [--purge]
set -euo pipefail
ROOT=""
PURGE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT="${2:?--root needs a directory}"; shift 2 ;;
    --purge) PURGE=1; shift ;;
    *) echo "uninstall.sh: unknown argument $1 (expected --root DIR, --purge)" >&2; exit 2 ;;
  esac
done
say() { printf 'uninstall: %s\n' "$*"; }
if [ -z "$ROOT" ] && [ -d /run/systemd/system ]; then
  systemctl disable --now compute-agent 2>/dev/null || true
fi
rm -f "$ROOT/etc/systemd/system/compute-agent.service" "$ROOT/etc/systemd/system/compute-agent.service.d/gpu-devices.conf"
rmdir "$ROOT/etc/systemd/system/compute-agent.service.d" 2>/dev/null || true
[ -z "$ROOT" ] && [ -d /run/systemd/system ] && systemctl daemon-reload
rm -f "$ROOT/usr/local/bin/compute-agent"
rm -rf "$ROOT/opt/compute-agent"
say "code and unit removed"
if [ "$PURGE" -eq 1 ]; then
  rm -rf "$ROOT/etc/compute-agent" "$ROOT/var/lib/compute-agent"
  if [ -z "$ROOT" ]; then
    getent passwd compute-agent >/dev/null && userdel compute-agent
    getent group compute-agent >/dev/null && groupdel compute-agent
  fi
  say "configuration, state and account removed"
else
  say "kept /etc/compute-agent and /var/lib/compute-agent (use --purge to remove them)"
fi
