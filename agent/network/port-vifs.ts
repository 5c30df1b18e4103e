/**
 * Ports as an instance's VIFs: the network, subnet and floating-IP lookups `vifOf` needs, done
 * once per set of ports, and the `binding:profile` edits that bind and unbind them.
 *
 * It is: read-only Neutron lookups and pure helpers shared by `NetworkService` and `LiveBindings`.
 * It is not: binding or unbinding (the callers' PUTs).
 */
import type { Vif } from '../../model/network';
import type { NeutronApi, NeutronNetwork, NeutronPort } from './neutron-api';
import { vifOf } from './vif-model';

/**
 * `ports` as VIFs in their order; a port whose network this user cannot see is left out, and
 * `preserved` names the ports the user gave (kept on delete). `networks` saves the lookup when
 * the caller has them.
 */
export async function vifsFor(
  neutron: NeutronApi,
  ports: readonly NeutronPort[],
  preserved: ReadonlySet<string>,
  networks?: ReadonlyMap<string, NeutronNetwork>,
): Promise<Vif[]> {
  const nets = networks ?? new Map((await neutron.listNetworks([...new Set(ports.map((p) => p.network_id))])).map((n) => [n.id, n]));
  const subnets = new Map((await neutron.listSubnets([...new Set(ports.flatMap((p) => p.fixed_ips.map((f) => f.subnet_id)))])).map((s) => [s.id, s]));
  const vifs: Vif[] = [];
  for (const port of ports) {
    const network = nets.get(port.network_id);
    if (!network) continue;
    const floatingIps = port.fixed_ips.length ? await neutron.listFloatingIps(port.id) : [];
    vifs.push(vifOf(port, { network, subnets, floatingIps, preserveOnDelete: preserved.has(port.id) }));
  }
  return vifs;
}

/**
 * `{'binding:profile': ...}` without `keys`, or nothing when the profile has none of them: Neutron
 * 2025.1 lets only the `service` role write `binding:profile`, so it is sent only when it must change.
 */
export function profileWithout(port: NeutronPort, keys: readonly string[]): { 'binding:profile'?: Record<string, unknown> } {
  const profile = port['binding:profile'];
  if (!Object.keys(profile).some((k) => keys.includes(k))) return {};
  return { 'binding:profile': Object.fromEntries(Object.entries(profile).filter(([k]) => !keys.includes(k))) };
}
