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
import type { NovaObjectPrimitive } from './args';
import { Dispatcher } from './dispatcher';
import type { HostUptimeProvider } from './uptime';

export const COMPUTE_TOPIC = 'compute';
/** The compute RPC major version the agent speaks. */
export const COMPUTE_RPC_MAJOR = 6;

export interface HostMethodDeps {
  /** The host's uptime text (the virt driver's `get_host_uptime`). */
  readonly hostUptime: HostUptimeProvider;
}

/** Registers the host-level compute methods. */
export function registerHostMethods(dispatcher: Dispatcher, deps: HostMethodDeps): Dispatcher {
  return dispatcher.register({
    name: 'get_host_uptime',
    versions: { min: '6.0' },
    args: {},
    journaled: false,
    handler: () => deps.hostUptime(),
  });
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
