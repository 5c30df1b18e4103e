#!/usr/bin/env bash
# Installs compute-agent as a systemd service. Idempotent: running it again upgrades the code and
# the unit and leaves configuration and state alone.
#
#   systemd/install.sh [--root DIR] [--no-build] [--gpu-devices auto|yes|no]
#
# --root DIR  stage everything under DIR (for packaging and tests): no user is created, no
#             ownership is changed, systemd is not told.
# --no-build  install the dist/ already built.
# --gpu-devices  the GPU/VFIO drop-in (systemd/gpu-devices.conf): auto (the default) writes it when
#             /dev/nvidiactl, /dev/nvidia0, /dev/dri or /dev/vfio exists on this machine (never in
#             a staging root), yes always, no removes it.
#
# What it puts where (uninstall.sh removes the same list):
#   /opt/compute-agent/               the built agent, package.json, production node_modules
#   /usr/local/bin/compute-agent      symlink to the binary
#   /etc/systemd/system/compute-agent.service
#   /etc/systemd/system/compute-agent.service.d/gpu-devices.conf   only with GPU or VFIO nodes
#   /etc/compute-agent/               config dir, root:compute-agent 0750; the example config is
#                                     copied to compute-agent.conf (0640) only if none exists
#   /var/lib/compute-agent/           state_path, compute-agent:compute-agent 0750
#   user and group compute-agent      system account, no login shell
set -euo pipefail
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT=""
BUILD=1
GPU=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT="${2:?--root needs a directory}"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --gpu-devices)
      GPU="${2:?--gpu-devices needs auto, yes or no}"; shift 2
      case "$GPU" in auto|yes|no) ;; *) echo "install.sh: --gpu-devices takes auto, yes or no" >&2; exit 2 ;; esac ;;
    *) echo "install.sh: unknown argument $1 (expected --root DIR, --no-build, --gpu-devices auto|yes|no)" >&2; exit 2 ;;
  esac
done
staged() { [ -n "$ROOT" ]; }
say() { printf 'install: %s\n' "$*"; }

if ! staged && [ "$(id -u)" -ne 0 ]; then echo "install.sh: run as root (or use --root DIR)" >&2; exit 1; fi

if ! staged; then
  if ! getent group compute-agent >/dev/null; then groupadd --system compute-agent; say "group compute-agent created"; fi
  if ! getent passwd compute-agent >/dev/null; then
    useradd --system --gid compute-agent --home-dir /var/lib/compute-agent --no-create-home \
      --shell /usr/sbin/nologin --comment "compute-agent daemon" compute-agent
    say "user compute-agent created"
  fi
fi

if [ "$BUILD" -eq 1 ]; then (cd "$SRC" && npm run -s build); fi
[ -f "$SRC/dist/agent/cli/main.js" ] || { echo "install.sh: $SRC/dist is not built (npm run build)" >&2; exit 1; }

app="$ROOT/opt/compute-agent"
mkdir -p "$app"
rm -rf "$app/dist.new" && cp -a "$SRC/dist" "$app/dist.new"
rm -rf "$app/dist" && mv "$app/dist.new" "$app/dist"
chmod 0755 "$app/dist/agent/cli/main.js"
cp "$SRC/package.json" "$SRC/package-lock.json" "$SRC/README.md" "$app/"
if [ ! -d "$app/node_modules" ] || ! cmp -s "$SRC/package-lock.json" "$app/.installed-lock"; then
  (cd "$app" && npm ci --omit=dev --no-audit --no-fund --ignore-scripts >/dev/null)
  cp "$SRC/package-lock.json" "$app/.installed-lock"
  say "dependencies installed in $app"
fi

mkdir -p "$ROOT/usr/local/bin"
ln -sfn /opt/compute-agent/dist/agent/cli/main.js "$ROOT/usr/local/bin/compute-agent"

mkdir -p "$ROOT/etc/compute-agent"
chmod 0750 "$ROOT/etc/compute-agent"
if [ ! -e "$ROOT/etc/compute-agent/compute-agent.conf" ]; then
  cp "$SRC/config/compute-agent.conf.example" "$ROOT/etc/compute-agent/compute-agent.conf"
  chmod 0640 "$ROOT/etc/compute-agent/compute-agent.conf"
  say "example config copied to /etc/compute-agent/compute-agent.conf: edit it before starting ([DEFAULT] compute_driver has no default)"
fi
cp "$SRC/config/compute-agent.conf.example" "$ROOT/etc/compute-agent/compute-agent.conf.example"

mkdir -p "$ROOT/var/lib/compute-agent"
chmod 0750 "$ROOT/var/lib/compute-agent"

mkdir -p "$ROOT/etc/systemd/system"
install -m 0644 "$SRC/systemd/compute-agent.service" "$ROOT/etc/systemd/system/compute-agent.service"

# The base unit hides /dev (PrivateDevices=yes); GPU and VFIO probes need those nodes.
gpu_nodes() { ls -d /dev/nvidiactl /dev/nvidia0 /dev/dri /dev/vfio 2>/dev/null | tr '\n' ' '; }
dropin="$ROOT/etc/systemd/system/compute-agent.service.d/gpu-devices.conf"
if [ "$GPU" = auto ]; then
  if ! staged && [ -n "$(gpu_nodes)" ]; then GPU=yes; say "GPU/VFIO device nodes found: $(gpu_nodes)"; else GPU=no; fi
fi
if [ "$GPU" = yes ]; then
  install -D -m 0644 "$SRC/systemd/gpu-devices.conf" "$dropin"
  say "GPU/VFIO drop-in written: ${dropin#"$ROOT"}"
else
  rm -f "$dropin"
fi

if ! staged; then
  chown root:compute-agent /etc/compute-agent /etc/compute-agent/compute-agent.conf
  chown compute-agent:compute-agent /var/lib/compute-agent
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    say "unit installed; start with: systemctl enable --now compute-agent"
  else
    say "unit installed; systemd is not running here, so it was not loaded"
  fi
fi
say "done"
