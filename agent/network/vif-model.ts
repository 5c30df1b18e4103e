/**
 * Neutron's ports as nova's VIF model (`model/network.ts`): what `get_instance_nw_info` builds
 * (nova `network/neutron.py` `_build_vif_model`, `_nw_info_build_network`,
 * `_get_subnets_from_port`). Pure functions over what Neutron answered.
 *
 * It is: the translation, unit-tested. It is not: the requests (`network-api.ts` makes them).
 */
import { tapName, type NetIp, type NetSubnet, type Vif } from '../../model/network';
import type { NeutronFloatingIp, NeutronNetwork, NeutronPort, NeutronSubnet } from './neutron-api';

/** The integration bridge nova assumes when a binding names none (`[neutron] ovs_bridge`). */
export const DEFAULT_OVS_BRIDGE = 'br-int';
/** Network types that are tunnels: their VIFs carry `tunneled` (nova reads it for MTU decisions). */
const TUNNELS = new Set(['geneve', 'vxlan', 'gre']);

const ip = (address: string, type: NetIp['type']): NetIp => ({ address, type, version: address.includes(':') ? 6 : 4, meta: {} });

/** Everything Neutron said about one port's surroundings. */
export interface PortContext {
  readonly network: NeutronNetwork;
  readonly subnets: ReadonlyMap<string, NeutronSubnet>;
  readonly floatingIps: readonly NeutronFloatingIp[];
  /** The user gave this port (deleting the server unbinds it instead of deleting it). */
  readonly preserveOnDelete: boolean;
}

/** The subnets of a port with its fixed IPs on each, in the order of its fixed_ips. */
function subnetsOf(port: NeutronPort, ctx: PortContext): NetSubnet[] {
  const out: NetSubnet[] = [];
  for (const subnetId of [...new Set(port.fixed_ips.map((f) => f.subnet_id))]) {
    const s = ctx.subnets.get(subnetId);
    if (!s) continue;
    const ips = port.fixed_ips
      .filter((f) => f.subnet_id === subnetId)
      .map(
        (f): NetIp => ({
          ...ip(f.ip_address, 'fixed'),
          floating_ips: ctx.floatingIps.filter((fl) => fl.fixed_ip_address === f.ip_address).map((fl) => ip(fl.floating_ip_address, 'floating')),
        }),
      );
    out.push({
      cidr: s.cidr,
      dns: s.dns_nameservers.map((d) => ip(d, 'dns')),
      gateway: s.gateway_ip ? ip(s.gateway_ip, 'gateway') : null,
      ips,
      routes: s.host_routes.map((r) => ({ cidr: r.destination, gateway: ip(r.nexthop, 'gateway'), interface: null, meta: {} })),
      version: s.ip_version,
      meta: { enable_dhcp: s.enable_dhcp },
    });
  }
  return out;
}

/** One port as a VIF. */
export function vifOf(port: NeutronPort, ctx: PortContext): Vif {
  const details = port['binding:vif_details'];
  const bridgeName = typeof details.bridge_name === 'string' ? details.bridge_name : undefined;
  const networkType = ctx.network['provider:network_type'] ?? null;
  const ovsLike = port['binding:vif_type'] === 'ovs' || port['binding:vif_type'] === 'vhostuser';
  return {
    id: port.id,
    address: port.mac_address,
    type: port['binding:vif_type'],
    details,
    devname: tapName(port.id),
    ovs_interfaceid: ovsLike ? port.id : null,
    network: {
      id: ctx.network.id,
      bridge: bridgeName ?? (ovsLike ? DEFAULT_OVS_BRIDGE : null),
      label: ctx.network.name || null,
      subnets: subnetsOf(port, ctx),
      meta: {
        injected: false,
        tenant_id: ctx.network.tenant_id,
        mtu: ctx.network.mtu ?? null,
        physical_network: ctx.network['provider:physical_network'] ?? null,
        tunneled: networkType !== null && TUNNELS.has(networkType),
      },
    },
    active: port.status === 'ACTIVE' || !port.admin_state_up,
    vnic_type: port['binding:vnic_type'],
    profile: port['binding:profile'],
    preserve_on_delete: ctx.preserveOnDelete,
    delegate_create: true,
    qbh_params: null,
    qbg_params: null,
    meta: {},
  };
}
