/**
 * oslo's ping endpoint (`[DEFAULT] rpc_ping_enabled`): a call to `oslo_rpc_server_ping` answers
 * "pong", so health probes written for oslo services (they call it with version 1.0 and no
 * namespace, the defaults of oslo's endpoint Target) work against the agent too. It runs nothing
 * and is not journaled.
 *
 * Not here: the compute methods (`agent/compute/register.ts`).
 */
import type { Dispatcher } from './dispatcher';

export const PING_METHOD = 'oslo_rpc_server_ping';

/** Adds the ping method to `dispatcher`. @throws RegistrationError when it is already registered. */
export function registerPing(dispatcher: Dispatcher): Dispatcher {
  return dispatcher.register({ name: PING_METHOD, namespace: null, versions: { min: '1.0' }, args: {}, journaled: false, handler: async () => 'pong' });
}
