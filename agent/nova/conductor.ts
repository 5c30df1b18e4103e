/**
 * nova-conductor's object API as nova-compute uses it (nova `conductor/rpcapi.py`, oslo
 * `VersionedObjectIndirectionAPI`): calls on the control exchange, routing key `conductor`,
 * version 3.0; `object_class_action_versions` for class methods (`Service.get_by_host_and_binary`,
 * `InstanceActionEvent.event_start`), `object_action` for methods on an object (`Service.save`,
 * `Instance.save`, `Instance.destroy`), whose reply is `[updates, result]`; and the `baseapi` ping.
 * Also the scheduler fanout casts nova-compute sends (`update_instance_info`, `delete_instance_info`).
 *
 * Errors: a remote nova exception is a `ConductorError` naming the class (`ComputeHostNotFound`,
 * `UnexpectedTaskStateError`, ...) with the `RemoteError` as its cause; timeouts and broker errors
 * stay as the RPC client raises them.
 */
import type { RpcClient } from '../rpc/endpoint/client';
import { RemoteError } from '../rpc/oslo/errors';
import type { RpcContext } from '../rpc/oslo/messages';
import type { ObjectVersions } from './releases';

export const CONDUCTOR_TOPIC = 'conductor';
const CONDUCTOR_VERSION = '3.0';
const SCHEDULER_TOPIC = 'scheduler';
const SCHEDULER_VERSION = '4.2';
/**
 * Database failures the conductor rolled back and a retry can clear: a locked SQLite database (the
 * test plane), a deadlock or a lost connection. The write did not happen, so retrying is safe.
 */
const TRANSIENT = new Set(['OperationalError', 'DBConnectionError', 'DBDeadlock']);
const RETRIES = 3;

/** nova-conductor refused or failed an object call. */
export class ConductorError extends Error {
  constructor(
    readonly novaClass: string,
    readonly call: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${call}: ${novaClass}: ${message}`, options);
    this.name = 'ConductorError';
  }
}

/** The reply of `object_action`: the fields the conductor changed on the object, and the method's result. */
export interface ObjectActionReply {
  readonly updates: Readonly<Record<string, unknown>>;
  readonly result: unknown;
}

export interface ConductorOptions {
  /** The RPC client's calls and casts (borrowed). */
  readonly client: Pick<RpcClient, 'call' | 'cast'>;
  /** The exchange nova uses (`control_exchange`, "nova"). */
  readonly exchange: string;
  readonly timeoutMs: number;
  /** The object version manifest sent with class actions until `useObjectVersions` picks the release's. */
  readonly versions: ObjectVersions;
}

/** What nova mode needs from nova-conductor and the schedulers (tests use an in-memory one). */
export interface Conductor {
  /** The manifest class actions send, and new objects are made at: the registered release's. */
  readonly objectVersions: ObjectVersions;
  /** Switches to the manifest of the release the agent registers as (before it registers). */
  useObjectVersions(versions: ObjectVersions): void;
  ping(ctx: RpcContext, timeoutMs?: number): Promise<void>;
  classAction(ctx: RpcContext, objname: string, method: string, args: readonly unknown[], kwargs?: Readonly<Record<string, unknown>>): Promise<unknown>;
  /** `opts.timeoutMs` bounds this one call (the heartbeat's is shorter than its interval). */
  objectAction(ctx: RpcContext, objinst: Readonly<Record<string, unknown>>, method: string, args?: readonly unknown[], kwargs?: Readonly<Record<string, unknown>>, opts?: CallBound): Promise<ObjectActionReply>;
  schedulerFanout(ctx: RpcContext, method: string, args: Readonly<Record<string, unknown>>): Promise<void>;
}

/** How long one call waits for its reply, when not the client's `rpc_response_timeout`. */
export interface CallBound {
  readonly timeoutMs?: number;
}

/** Ownership: borrows the RPC client. Concurrency: any number of calls at once. */
export class ConductorClient implements Conductor {
  private versions: ObjectVersions;

  constructor(private readonly o: ConductorOptions) {
    this.versions = o.versions;
  }

  get objectVersions(): ObjectVersions {
    return this.versions;
  }

  useObjectVersions(versions: ObjectVersions): void {
    this.versions = versions;
  }

  /** `baseapi` ping: resolves once a conductor answers. */
  async ping(ctx: RpcContext, timeoutMs = this.o.timeoutMs): Promise<void> {
    await this.o.client.call(
      { topic: CONDUCTOR_TOPIC, exchange: this.o.exchange, namespace: 'baseapi', version: '1.0' },
      'ping',
      { arg: { service: 'compute-agent' } },
      { context: ctx, timeoutMs },
    );
  }

  /** A remotable class method, e.g. `('Service', 'get_by_host_and_binary', [host, binary])`. @throws ConductorError */
  classAction(ctx: RpcContext, objname: string, method: string, args: readonly unknown[], kwargs: Readonly<Record<string, unknown>> = {}): Promise<unknown> {
    return this.call(ctx, `${objname}.${method}`, 'object_class_action_versions', {
      objname,
      objmethod: method,
      object_versions: this.versions,
      args,
      kwargs,
    });
  }

  /** A remotable method on `objinst` (a primitive with its `nova_object.changes`). @throws ConductorError */
  async objectAction(ctx: RpcContext, objinst: Readonly<Record<string, unknown>>, method: string, args: readonly unknown[] = [], kwargs: Readonly<Record<string, unknown>> = {}, opts: CallBound = {}): Promise<ObjectActionReply> {
    const objName = objinst['nova_object.name'];
    const name = typeof objName === 'string' ? objName : 'object';
    const reply = await this.call(ctx, `${name}.${method}`, 'object_action', { objinst, objmethod: method, args, kwargs }, opts.timeoutMs);
    if (!Array.isArray(reply) || reply.length !== 2 || typeof reply[0] !== 'object' || reply[0] === null) {
      throw new ConductorError('BadReply', `${name}.${method}`, `expected [updates, result], got ${JSON.stringify(reply)?.slice(0, 200)}`);
    }
    return { updates: reply[0] as Record<string, unknown>, result: reply[1] };
  }

  /** A cast to every scheduler (`scheduler_fanout`), as nova-compute reports its instances. */
  schedulerFanout(ctx: RpcContext, method: string, args: Readonly<Record<string, unknown>>): Promise<void> {
    return this.o.client.cast({ topic: SCHEDULER_TOPIC, exchange: this.o.exchange, fanout: true, version: SCHEDULER_VERSION }, method, args, { context: ctx });
  }

  private async call(ctx: RpcContext, what: string, method: string, args: Readonly<Record<string, unknown>>, timeoutMs = this.o.timeoutMs): Promise<unknown> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.o.client.call({ topic: CONDUCTOR_TOPIC, exchange: this.o.exchange, version: CONDUCTOR_VERSION }, method, args, { context: ctx, timeoutMs });
      } catch (e) {
        if (!(e instanceof RemoteError)) throw e;
        if (TRANSIENT.has(e.className) && attempt < RETRIES) {
          await new Promise((r) => setTimeout(r, 250 * (attempt + 1)));
          continue;
        }
        throw new ConductorError(e.className, what, e.remoteMessage, { cause: e });
      }
    }
  }
}
