/**
 * The compute RPC API (topic `compute`, nova `compute/rpcapi.py`) as far as it is served today:
 * `get_host_uptime`. The compute manager issue adds its methods to the same dispatcher with
 * `dispatcher.register(...)`, e.g.
 *
 * ```ts
 * dispatcher.register({
 *   name: 'terminate_instance',
 *   versions: { min: '6.0' },
 *   args: { instance: arg.novaObject('Instance'), bdms: arg.optional(arg.any(), null) },
 *   orderingKey: (a) => instanceUuid(a.instance),
 *   handler: (a, call) => manager.terminateInstance(a, call),
 * });
 * ```
 *
 * Not here: the handlers' logic (the manager and the virt driver own it).
 */
import { arg, type NovaObjectPrimitive } from '../../rpc/endpoint/args';
import { Dispatcher } from '../../rpc/endpoint/dispatcher';
import type { HostUptimeProvider } from './host-uptime';

export const COMPUTE_TOPIC = 'compute';
/** The compute RPC major version the agent speaks. */
export const COMPUTE_RPC_MAJOR = 6;

export interface HostMethodDeps {
  /** The host's uptime text (the virt driver's `get_host_uptime`). */
  readonly hostUptime: HostUptimeProvider;
}

/**
 * Registers the host-level methods: `get_host_uptime` (compute API) and nova's BaseRPCAPI, which
 * every nova service serves on its topic in namespace `baseapi` (1.1): `ping` echoes its argument
 * with the service name, `get_backdoor_port` answers null (the agent has no eventlet backdoor).
 */
export function registerHostMethods(dispatcher: Dispatcher, deps: HostMethodDeps): Dispatcher {
  return dispatcher
    .register({ name: 'get_host_uptime', versions: { min: '6.0' }, args: {}, journaled: false, handler: () => deps.hostUptime() })
    .register({
      name: 'ping',
      namespace: 'baseapi',
      versions: { min: '1.0', max: '1.1' },
      args: { arg: arg.any() },
      journaled: false,
      handler: async (a) => ({ service: 'nova-compute', arg: a.arg }),
    })
    .register({ name: 'get_backdoor_port', namespace: 'baseapi', versions: { min: '1.1' }, args: {}, journaled: false, handler: async () => null });
}

/** The uuid of an Instance primitive, for `orderingKey`. */
export function instanceUuid(instance: NovaObjectPrimitive): string | undefined {
  const uuid = instance['nova_object.data'].uuid;
  return typeof uuid === 'string' ? uuid : undefined;
}

/** A dispatcher with what the agent serves today. */
export function computeDispatcher(deps: HostMethodDeps): Dispatcher {
  return registerHostMethods(new Dispatcher(), deps);
}
