/**
 * An instance's network, in nova's vocabulary: the list of VIFs (`network_info`) that nova keeps
 * in `InstanceInfoCache.network_info` and hands to its virt driver (nova `network/model.py`).
 *
 * It is: plain JSON in nova's field names, so the same value is what the conductor saves in the
 * info cache, what nova-api reads the server's addresses from, what the journal stores, and what a
 * virt driver plugs. It is not: a Neutron client (the agent builds these from Neutron's ports in
 * `agent/network/`) nor the plugging itself (the virt drivers do that).
 *
 * Contracts: `id` is the Neutron port's uuid, `address` its MAC; `devname` is the host device
 * (`tap` + the port uuid, cut to 14 characters, as nova names it); `details` are the port binding's
 * `binding:vif_details` as Neutron gave them (only the keys a plugger reads are typed).
 */

/** An IP address on a VIF or a subnet (nova's `IP` / `FixedIP`). */
export interface NetIp {
  readonly address: string;
  readonly type: 'fixed' | 'floating' | 'gateway' | 'dns';
  readonly version: 4 | 6;
  readonly meta: Readonly<Record<string, unknown>>;
  /** Only on fixed IPs: the floating IPs that map to it. */
  readonly floating_ips?: readonly NetIp[];
}

/** A route of a subnet (nova's `Route`). */
export interface NetRoute {
  readonly cidr: string;
  readonly gateway: NetIp;
  readonly interface: string | null;
  readonly meta: Readonly<Record<string, unknown>>;
}

/** A subnet as a VIF sees it (nova's `Subnet`); `meta.enable_dhcp` and `meta.dhcp_server` as nova sets them. */
export interface NetSubnet {
  readonly cidr: string;
  readonly dns: readonly NetIp[];
  readonly gateway: NetIp | null;
  readonly ips: readonly NetIp[];
  readonly routes: readonly NetRoute[];
  readonly version: 4 | 6;
  readonly meta: Readonly<Record<string, unknown>>;
}

/** The network a VIF is on (nova's `Network`); `meta` carries `mtu`, `tenant_id`, `physical_network`, `tunneled`. */
export interface Network {
  readonly id: string;
  /** The bridge the port is plugged into (`vif_details.bridge_name`, else `br-int`). */
  readonly bridge: string | null;
  readonly label: string | null;
  readonly subnets: readonly NetSubnet[];
  readonly meta: Readonly<Record<string, unknown>> & { readonly mtu?: number | null };
}

/** `binding:vif_details`, the keys pluggers read; Neutron may send more, which are kept. */
export interface VifDetails {
  readonly port_filter?: boolean;
  readonly ovs_hybrid_plug?: boolean;
  readonly bridge_name?: string;
  readonly datapath_type?: string;
  readonly connectivity?: string;
  readonly [key: string]: unknown;
}

/** The VIF types a plugger may meet (`binding:vif_type`); `binding_failed` and `unbound` fail a build. */
export type VifType = 'ovs' | 'bridge' | 'tap' | 'vhostuser' | 'binding_failed' | 'unbound' | (string & {});

/** One VIF (nova's `VIF`): a Neutron port as the compute host plugs it. */
export interface Vif {
  /** The Neutron port uuid. */
  readonly id: string;
  /** The MAC address. */
  readonly address: string;
  readonly type: VifType;
  readonly details: VifDetails;
  readonly devname: string;
  readonly ovs_interfaceid: string | null;
  readonly network: Network;
  /** Whether Neutron has the port ACTIVE already (then no `network-vif-plugged` is awaited). */
  readonly active: boolean;
  readonly vnic_type: string;
  readonly profile: Readonly<Record<string, unknown>>;
  /** The user gave the port: deleting the server unbinds it rather than deleting it. */
  readonly preserve_on_delete: boolean;
  readonly delegate_create: boolean;
  readonly qbh_params: null;
  readonly qbg_params: null;
  readonly meta: Readonly<Record<string, unknown>>;
}

/** An instance's VIFs, in the order of its NICs. */
export type NetworkInfo = readonly Vif[];

/** One requested network: a network (with an optional fixed IP), an existing port, or nova's `none` / `auto`. */
export type NetworkRequest =
  | { readonly kind: 'network'; readonly network_id: string; readonly address?: string; readonly tag?: string }
  | { readonly kind: 'port'; readonly port_id: string; readonly tag?: string };

/** What a build asked for: no network at all, Neutron's one choice (`auto`), or the list. */
export type RequestedNetworks = { readonly kind: 'none' } | { readonly kind: 'auto' } | { readonly kind: 'list'; readonly requests: readonly NetworkRequest[] };

/**
 * nova's request group -> resource provider mapping for a build (`RequestSpec.
 * get_request_group_mapping()`): the requester of each group the scheduler fulfilled besides the
 * flavor's (a port's uuid for Neutron's legacy resource request, the group's id for the extended
 * one) -> the providers it came from (one, for a port's group).
 */
export type ProviderMapping = Readonly<Record<string, readonly string[]>>;

/** How long a Linux interface name may be (IFNAMSIZ - 1), and nova's device prefix. */
const NIC_NAME_LEN = 14;

/** The tap device of a port, as nova names it: `tap` + the port uuid, cut to 14 characters. */
export function tapName(portId: string): string {
  return `tap${portId}`.slice(0, NIC_NAME_LEN);
}

/** A hybrid-plug device of a port (`qbr`, `qvb`, `qvo`), named as os-vif and nova name them. */
export function hybridName(prefix: 'qbr' | 'qvb' | 'qvo', portId: string): string {
  return `${prefix}${portId}`.slice(0, NIC_NAME_LEN);
}

/** The network's MTU for this VIF, when Neutron gave one. */
export function vifMtu(vif: Vif): number | undefined {
  const m = vif.network.meta.mtu;
  return typeof m === 'number' && m > 0 ? m : undefined;
}

/** The bridge a VIF is plugged into: the binding's `bridge_name`, then the network's, then `br-int`. */
export function vifBridge(vif: Vif): string {
  return vif.details.bridge_name ?? vif.network.bridge ?? 'br-int';
}

/** The fixed addresses of a VIF, in subnet order. */
export function fixedIps(vif: Vif): string[] {
  return vif.network.subnets.flatMap((s) => s.ips.filter((ip) => ip.type === 'fixed').map((ip) => ip.address));
}

/** The event a compute host waits for before it runs a guest on a port (`network-vif-plugged-<port>`). */
export function vifPluggedEvent(portId: string): string {
  return `network-vif-plugged-${portId}`;
}
