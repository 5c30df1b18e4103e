/**
 * This host's primary IPv4 address, nova's `my_ip` default (oslo.utils `get_my_ipv4`): the first
 * IPv4 address of the interface the IPv4 default route leaves by, else the first non-loopback IPv4
 * address, else 127.0.0.1. Read synchronously (the kernel's route table and the interface list)
 * because option defaults are computed while the file is loaded.
 *
 * It is not: a reachability check; an operator whose hosts talk over another network sets my_ip.
 */
import { readFileSync } from 'node:fs';
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';

/** What the address is computed from (tests give their own). */
export interface HostAddressSources {
  /** `/proc/net/route` as text, or undefined where it cannot be read. */
  readonly routes: () => string | undefined;
  readonly interfaces: () => NodeJS.Dict<NetworkInterfaceInfo[]>;
}

const SYSTEM: HostAddressSources = {
  routes: () => {
    try {
      return readFileSync('/proc/net/route', 'utf8');
    } catch {
      return undefined;
    }
  },
  interfaces: () => networkInterfaces(),
};

/** The interface of the IPv4 default route (destination 00000000, lowest metric). */
export function defaultRouteInterface(routes: string): string | undefined {
  let best: { iface: string; metric: number } | undefined;
  for (const line of routes.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    const [iface, destination, , , , , metric] = cols;
    if (cols.length < 8 || destination !== '00000000' || iface === undefined) continue;
    const m = Number(metric);
    if (!best || m < best.metric) best = { iface, metric: m };
  }
  return best?.iface;
}

export function primaryAddress(sources: HostAddressSources = SYSTEM): string {
  const ifaces = sources.interfaces();
  const v4 = (name: string): string | undefined => ifaces[name]?.find((a) => a.family === 'IPv4')?.address;
  const routes = sources.routes();
  const iface = routes === undefined ? undefined : defaultRouteInterface(routes);
  const viaRoute = iface === undefined ? undefined : v4(iface);
  if (viaRoute) return viaRoute;
  for (const list of Object.values(ifaces)) {
    const a = list?.find((x) => x.family === 'IPv4' && !x.internal);
    if (a) return a.address;
  }
  return '127.0.0.1';
}
