/**
 * The methods about the host rather than an instance, served on the compute topic beside the
 * instance methods (`../methods.ts`) and with the same row type: `get_host_uptime` (nova's compute
 * API, `compute/rpcapi.py`), and nova's BaseRPCAPI (`nova/baseapi.py`), which every nova service
 * serves on its topic in namespace `baseapi` (1.1): `ping` echoes its argument with the service
 * name, `get_backdoor_port` answers null (the agent has no eventlet backdoor).
 *
 * None is journaled or ordered: each reads, and a lost one is simply asked again.
 */
import { arg } from '../../rpc/endpoint/args';
import { method, NOVA_COMPUTE_API, type ComputeMethod } from '../method-table';
import type { HostUptimeProvider } from './host-uptime';

/** nova's BaseRPCAPI target namespace. */
export const BASE_API_NAMESPACE = 'baseapi';

export interface HostMethodDeps {
  /** The host's uptime text (the virt driver's `get_host_uptime`). */
  readonly hostUptime: HostUptimeProvider;
}

export function hostMethods(deps: HostMethodDeps): ComputeMethod[] {
  return [
    method({ name: 'get_host_uptime', ...NOVA_COMPUTE_API, journaled: false, args: {}, handle: () => deps.hostUptime() }),
    method({
      name: 'ping',
      namespace: BASE_API_NAMESPACE,
      versions: { min: '1.0', max: '1.1' },
      journaled: false,
      args: { arg: arg.any() },
      handle: async (a) => ({ service: 'nova-compute', arg: a.arg }),
    }),
    method({ name: 'get_backdoor_port', namespace: BASE_API_NAMESPACE, versions: { min: '1.1' }, journaled: false, args: {}, handle: async () => null }),
  ];
}
