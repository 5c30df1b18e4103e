# Helpers shared by the dev-stack scripts (stack, nova-stack, glance-stack, keystone-stack); each
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
