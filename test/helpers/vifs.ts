/**
 * VIFs for tests, shaped as nova's network_info entries of an ML2/OVN port (vif_type ovs,
 * br-int, a Geneve network's MTU of 1442) unless overridden.
 */
import { tapName, type Vif } from '../../model/network';

/** A VIF of port `id` with MAC `mac`; `over` replaces fields (details merge). */
export function ovsVif(id: string, mac: string, over: Partial<Omit<Vif, 'details'>> & { details?: Vif['details']; mtu?: number | null } = {}): Vif {
  const { details, mtu, ...rest } = over;
  return {
    id,
    address: mac,
    type: 'ovs',
    details: { port_filter: true, connectivity: 'l2', bridge_name: 'br-int', datapath_type: 'netdev', ...(details ?? {}) },
    devname: tapName(id),
    ovs_interfaceid: id,
    network: { id: 'net-1', bridge: 'br-int', label: 'private', subnets: [], meta: { mtu: mtu === undefined ? 1442 : mtu, tunneled: true } },
    active: false,
    vnic_type: 'normal',
    profile: {},
    preserve_on_delete: false,
    delegate_create: true,
    qbh_params: null,
    qbg_params: null,
    meta: {},
    ...rest,
  };
}
