# ML2/OVS for scripts/neutron-stack (NEUTRON_ML2=openvswitch), as kolla-ansible 2025.1 deploys it by
# default: the openvswitch mechanism driver with vxlan tenant networks, and on each agent host the
# Open vSwitch agent (br-int, br-tun, security groups with the host's firewall driver) and the
# DHCP agent (dnsmasq in a qdhcp-<network> namespace). Facts: docs/neutron-stack.md.
# Not a script of its own: neutron-stack sources it; it defines functions and sets nothing. The
# functions use neutron-stack's ND, TRANSPORT_URL, NEUTRON_OVS_FIREWALL and helpers.

ml2_ovs_conf() {
  cat <<EOF
[ml2]
type_drivers = local,flat,vxlan
tenant_network_types = vxlan
mechanism_drivers = openvswitch
extension_drivers = port_security,qos
overlay_ip_version = 4

[ml2_type_vxlan]
vni_ranges = 1:65536

[ml2_type_flat]
flat_networks = physnet1

[securitygroup]
enable_security_group = true
EOF
}

# What every agent of host NAME shares: its host name (Neutron's agent host, matched against
# binding:host_id), the broker, a state directory d/KIND of its own, no root helper (root already),
# and privsep daemons started directly; with the agent's own [DEFAULT] and [agent] lines.
ovs_agent_common() { # name kind default-lines agent-lines
  local d; d="$(host_dir "$1")"
  cat <<EOF
[DEFAULT]
host = $1
transport_url = $(broker_url_in_host)
state_path = $d/$2
log_file = $d/$2-agent.log
use_stderr = false
$3
[agent]
root_helper =
report_interval = 10
$4

[oslo_concurrency]
lock_path = $d/$2/lock

EOF
  # Every privsep context of neutron's: a default one goes through sudo, whose clean environment
  # loses OVS_RUNDIR (ovs-vsctl then looks for /var/run/openvswitch/db.sock).
  local section
  for section in privsep privsep_dhcp_release privsep_ovs_vsctl privsep_namespace privsep_conntrack privsep_link; do
    printf '\n[%s]\nhelper_command = privsep-helper --config-file %s\n' "$section" "$d/$2_agent.ini"
  done
}

# The Open vSwitch agent: bridges of the userspace datapath, vxlan from the host's underlay address
# (on br-ul's own interface, as for geneve), its OpenFlow controller on the namespace's loopback.
ovs_agent_ini() { # name encap-ip firewall
  local d; d="$(host_dir "$1")"
  ovs_agent_common "$1" openvswitch "" "tunnel_types = vxlan
l2_population = false"
  cat <<EOF

[ovs]
integration_bridge = br-int
tunnel_bridge = br-tun
local_ip = $2
datapath_type = netdev
bridge_mappings = physnet1:br-ex
ovsdb_connection = unix:$d/db.sock
of_listen_address = 127.0.0.1

[securitygroup]
enable_security_group = true
firewall_driver = $3
EOF
}

# The DHCP agent: its port a veth (one end in qdhcp-<network>, the other on br-int), since an OVS
# internal port of the userspace datapath is a tap that ovs-vswitchd loses sight of once it is
# moved into another namespace. No metadata through DHCP (the OVN scenarios cover metadata).
dhcp_agent_ini() { # name
  local d; d="$(host_dir "$1")"
  ovs_agent_common "$1" dhcp "interface_driver = openvswitch
ovs_use_veth = true
dhcp_driver = neutron.agent.linux.dhcp.Dnsmasq
enable_isolated_metadata = false
dnsmasq_local_resolv = false
dnsmasq_config_file = $d/dnsmasq.conf" ""
  cat <<EOF

[ovs]
integration_bridge = br-int
ovsdb_connection = unix:$d/db.sock
EOF
}

# Whether host NAME's agent BINARY has started since STAMP (UTC): agents write started_at into
# their row of Neutron's database with the first report after a start.
ovs_agent_reported() { # name binary stamp
  [ "$(db_sql -N -B -e "select count(*) from neutron.agents where host = '$1' and \`binary\` = '$2' and started_at >= '$3'" 2>/dev/null)" = 1 ]
}

# The broker's HOST:PORT in TRANSPORT_URL (one broker: the relay below carries one).
broker_address() {
  local a
  a="$(printf '%s' "$TRANSPORT_URL" | sed -n 's#^[a-z0-9+]*://\([^@/]*@\)\{0,1\}\([^/]*\)/.*$#\2#p')"
  case "$a" in
    ''|*,*) die "TRANSPORT_URL must name one broker, as rabbit://user:password@host:port/ (the ML2/OVS agents reach it through one relay), not '$TRANSPORT_URL'" ;;
    *:*) echo "$a" ;;
    *) echo "$a:5672" ;;
  esac
}

# TRANSPORT_URL as the agents inside a host's namespace use it: the relay's end on the namespace's loopback.
broker_url_in_host() {
  local a; a="$(broker_address)"
  printf '%s' "$TRANSPORT_URL" | sed "s#$a/#127.0.0.1:${a##*:}/#"
}

# The broker for agents inside host NAME's network namespace, whose loopback is not the machine's:
# one socat in the machine's namespace connects to the broker for each client of a unix socket (a
# file both namespaces see), and one in the host's namespace listens on its 127.0.0.1 at the
# broker's port and connects to that socket.
broker_relay_up() { # name
  local name="$1" d ns a
  d="$(host_dir "$name")"; ns="$(host_ns "$name")"; a="$(broker_address)"
  pid_file_pid "$d/broker-relay.pid" >/dev/null && pid_file_pid "$d/broker-relay-ns.pid" >/dev/null && return 0
  broker_relay_down "$name"
  setsid socat UNIX-LISTEN:"$d/broker.sock",fork,unlink-early TCP:"$a" </dev/null >>"$d/broker-relay.out" 2>&1 &
  echo $! >"$d/broker-relay.pid"
  setsid nsenter --net="/run/netns/$ns" -- socat TCP-LISTEN:"${a##*:}",bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:"$d/broker.sock" \
    </dev/null >>"$d/broker-relay.out" 2>&1 &
  echo $! >"$d/broker-relay-ns.pid"
  wait_for 10 "the broker relay of $name (see $d/broker-relay.out)" nsenter --net="/run/netns/$ns" -- bash -c "exec 3<>/dev/tcp/127.0.0.1/${a##*:}"
}

broker_relay_down() { # name
  local d; d="$(host_dir "$1")"
  stop_pidfile "$d/broker-relay-ns.pid" "broker relay in the namespace of $1"
  stop_pidfile "$d/broker-relay.pid" "broker relay of $1"
  rm -f "$d/broker.sock"
}

# Host NAME's Open vSwitch agent (NEUTRON_OVS_FIREWALL, kept in d/firewall) and DHCP agent, each
# started when not running and waited for until Neutron has its report.
ovs_agents_up() { # name encap-ip
  local name="$1" d stamp
  d="$(host_dir "$name")"
  [ -s "$d/firewall" ] || echo "$NEUTRON_OVS_FIREWALL" >"$d/firewall"
  stamp="$(date -u '+%F %T')"
  broker_relay_up "$name"
  if ! pid_file_pid "$d/openvswitch-agent.pid" >/dev/null; then
    host_agent_down "$name" openvswitch "Open vSwitch agent of $name" >/dev/null 2>&1
    mkdir -p "$d/openvswitch"
    ovs_agent_ini "$name" "$2" "$(cat "$d/firewall")" >"$d/openvswitch_agent.ini"
    host_agent_spawn "$name" openvswitch neutron-openvswitch-agent
    wait_for 90 "the Open vSwitch agent of $name (see $d/openvswitch-agent.log)" ovs_agent_reported "$name" neutron-openvswitch-agent "$stamp"
  fi
  if ! pid_file_pid "$d/dhcp-agent.pid" >/dev/null; then
    # What a dead one left: its dnsmasqs, and the names of its namespaces (gone with its mount namespace).
    ovs_dhcp_down "$name" >/dev/null 2>&1
    mkdir -p "$d/dhcp" "$d/netns"
    dhcp_agent_ini "$name" >"$d/dhcp_agent.ini"
    # dnsmasq drops to nobody and re-reads its hosts file on each port change as that user; the
    # stack's directory may be one only root can enter (a test's mkdtemp), so it stays root.
    printf 'user=root\n' >"$d/dnsmasq.conf"
    host_agent_spawn "$name" dhcp neutron-dhcp-agent
    wait_for 90 "the DHCP agent of $name (see $d/dhcp-agent.log)" ovs_agent_reported "$name" neutron-dhcp-agent "$stamp"
  fi
}

ovs_dhcp_down() { # name
  host_agent_down "$1" dhcp "DHCP agent of $1"
  rm -rf "$(host_dir "$1")/netns"
}

ovs_agents_down() { # name
  ovs_dhcp_down "$1"
  host_agent_down "$1" openvswitch "Open vSwitch agent of $1"
  broker_relay_down "$1"
}
