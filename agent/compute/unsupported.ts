/**
 * nova's compute RPC methods (6.x, nova 31 `compute/rpcapi.py`, and Zed's `get_rdp_console`) that
 * the agent does not implement, each answered at once so that no server waits in a task state for
 * a compute host that will never act:
 *
 * - a cast about an instance (`error`): the instance goes to ERROR, its task state cleared, with
 *   a fault naming the method (nova shows it in `GET /servers/<id>`);
 * - a cast that arrives in the middle of another operation (`log`: a volume snapshot of a running
 *   guest's volume): logged and dropped, since putting the instance in ERROR would break the
 *   operation it belongs to;
 * - a call (`call`): the caller gets `NotImplementedError` (nova's API answers 501 for it).
 *
 * Each method takes nova's arguments as sent (every one optional and unread but `instance`), so a
 * well-formed request from Zed or 2025.1 is never refused as a bad call. A method the agent comes
 * to implement moves from this list to a row in `methods.ts`.
 *
 * Not here: the host methods (`adapters/host-methods.ts`); methods nova's rpcapi does not send.
 */
import { InstanceNotFoundError } from '../../model/instance';
import type { RemoteFailure, RemoteSerializable } from '../rpc/oslo/failure';
import { computeArgs as A, unread } from './decode';
import type { FlowContext } from './flow-context';
import { instanceKey, method, NOVA_COMPUTE_API, type ComputeMethod } from './method-table';
import type { RequestContext } from './ports';
import { transition } from './transitions';

/** How a method the agent does not implement is answered (see the module comment). */
export type Disposition = 'error' | 'log' | 'call';

interface Unsupported {
  readonly kind: Disposition;
  /** nova's arguments besides `instance`. */
  readonly args: readonly string[];
}

const cast = (...args: string[]): Unsupported => ({ kind: 'error', args });
const sideCast = (...args: string[]): Unsupported => ({ kind: 'log', args });
const call = (...args: string[]): Unsupported => ({ kind: 'call', args });

/** The methods with an `instance` argument nova may send that the agent does not implement, with their other arguments. */
export const UNSUPPORTED_METHODS: Readonly<Record<string, Unsupported>> = {
  add_fixed_ip_to_instance: cast('network_id'),
  remove_fixed_ip_from_instance: cast('address'),
  allow_share: cast('share_mapping'),
  deny_share: cast('share_mapping'),
  volume_snapshot_create: sideCast('volume_id', 'create_info'),
  volume_snapshot_delete: sideCast('volume_id', 'snapshot_id', 'delete_info'),
  confirm_snapshot_based_resize_at_source: call('migration'),
  finish_snapshot_based_resize_at_dest: call('migration', 'snapshot_id', 'request_spec'),
  finish_revert_snapshot_based_resize_at_source: call('migration'),
  prep_snapshot_based_resize_at_dest: call('flavor', 'nodename', 'migration', 'limits', 'request_spec'),
  prep_snapshot_based_resize_at_source: call('migration', 'snapshot_id'),
  revert_snapshot_based_resize_at_dest: call('migration'),
  get_spice_console: call('console_type'),
  // Zed's (removed in 2025.1).
  get_rdp_console: call('console_type'),
  get_mks_console: call('console_type'),
};

/** The fault a server gets for `method`. */
export function unsupportedFault(name: string): string {
  return `compute-agent does not implement ${name}`;
}

/** A compute method the agent does not implement was asked for. Remote: `NotImplementedError` (builtins), which nova's API answers with 501. */
export class UnsupportedMethodError extends Error implements RemoteSerializable {
  constructor(
    readonly method: string,
    readonly instance: string,
  ) {
    super(`${unsupportedFault(method)} (instance ${instance})`);
    this.name = 'UnsupportedMethodError';
  }
  toRemoteFailure(): RemoteFailure {
    return { className: 'NotImplementedError', module: 'builtins', message: this.message, tb: [`NotImplementedError: ${this.message}\n`], args: [this.message], kwargs: {} };
  }
}

type UnsupportedContext = Pick<FlowContext, 'locks' | 'record' | 'save' | 'log' | 'notify'>;

/**
 * Answers `name` for `uuid` as its disposition says: ERROR with a fault (a cast), or the log (a
 * cast in the middle of another operation, or a call).
 * @throws UnsupportedMethodError always, after the instance is in the state it is left in;
 * InstanceNotFoundError when a cast names an instance this host has no record of
 */
export async function refuseUnsupported(c: UnsupportedContext, name: string, uuid: string, ctx: RequestContext): Promise<never> {
  const how = UNSUPPORTED_METHODS[name];
  const fault = unsupportedFault(name);
  if (how?.kind === 'error') {
    await c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (!rec) throw new InstanceNotFoundError(uuid);
      transition(rec, 'unsupported.error');
      rec.fault = fault;
      await c.save(rec);
      await c.notify(rec, 'unsupported.error', ctx, fault);
    });
  }
  c.log.warn({ instance: uuid, method: name, disposition: how?.kind ?? 'call' }, fault);
  throw new UnsupportedMethodError(name, uuid);
}

/**
 * The rows answering every method of `UNSUPPORTED_METHODS` (`received` hands the arguments as
 * sent to the control plane).
 */
export function unsupportedMethods(c: UnsupportedContext, received: (sent: Readonly<Record<string, unknown>>) => void): ComputeMethod[] {
  const rows = Object.entries(UNSUPPORTED_METHODS).map(([name, how]) =>
    method({
      name,
      ...NOVA_COMPUTE_API,
      // A cast that puts the instance in ERROR is replayed after a crash; the others change nothing here.
      journaled: how.kind === 'error',
      args: { instance: A.instanceRef, ...unread(...how.args) },
      key: instanceKey,
      handle: (a, call) => {
        received(call.sent);
        return refuseUnsupported(c, name, a.instance.uuid, call.context);
      },
    }),
  );
  return rows;
}
