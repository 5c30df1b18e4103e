/**
 * An in-memory nova-conductor for unit tests of nova mode, with nova's rules where the agent can
 * get them wrong: a save writes only the fields named in `nova_object.changes`; `Instance.save`
 * with `expected_task_state` raises UnexpectedTaskStateError when the stored task state differs;
 * `Service.save` bumps `last_seen_up` only when `report_count` grows; unknown compute nodes raise
 * ComputeHostNotFound; an `Instance.save` of `node` without `compute_id` on an Instance 2.8 or later
 * raises ObjectActionError (nova 2023.2 on). It runs one release (Zed unless told): objects come at
 * that release's versions and `Service.get_minimum_version('nova-conductor')` answers its service
 * version. Every call is recorded.
 */
import { randomUUID } from 'node:crypto';
import { ConductorError, type CallBound, type Conductor, type ObjectActionReply } from '../../agent/nova/conductor';
import type { RpcContext } from '../../agent/rpc/oslo/messages';
import { ZED, type NovaRelease, type ObjectVersions } from '../../agent/nova/releases';

type Data = Record<string, unknown>;

export interface ConductorCall {
  readonly kind: 'class' | 'object' | 'fanout' | 'ping';
  /** e.g. `Instance.save`, `InstanceActionEvent.event_start`, `update_instance_info`. */
  readonly what: string;
  readonly changes?: readonly string[];
  readonly args?: readonly unknown[];
  readonly kwargs?: Readonly<Record<string, unknown>>;
  /** Object calls: the object's `nova_object.data` as sent. */
  readonly data?: Readonly<Record<string, unknown>>;
  readonly ctx: RpcContext;
  /** The bound the caller set on this call's wait for a reply, if any. */
  readonly timeoutMs?: number;
}

const atLeast = (version: string, major: number, minor: number): boolean => {
  const [a = 0, b = 0] = version.split('.').map(Number);
  return a > major || (a === major && b >= minor);
};
const dataOf = (o: Readonly<Record<string, unknown>>): Data => o['nova_object.data'] as Data;
export interface FakeConductorOptions {
  /** The release the control plane runs (default Zed). */
  readonly release?: NovaRelease;
  /** What `Service.get_minimum_version('nova-conductor')` answers; null: it fails. Default: the release's service version. */
  readonly conductorVersion?: number | null;
}

export class FakeConductor implements Conductor {
  readonly release: NovaRelease;
  readonly conductorVersion: number | null;
  objectVersions: ObjectVersions = ZED.objects;
  /** When set, every scheduler fanout cast fails with it (a broker refusing the exchange). */
  fanoutError: Error | undefined;
  readonly calls: ConductorCall[] = [];
  readonly services = new Map<string, Data>();
  readonly nodes = new Map<string, Data>();
  readonly instances = new Map<string, Data>();
  readonly migrations = new Map<string, Data>();
  /** InstanceFault rows, in the order created. */
  readonly faults: Data[] = [];
  /** VirtualInterface rows (not deleted), in the order created. */
  /** BlockDeviceMapping rows by id (saved by the volume steps). */
  readonly bdms = new Map<number, Data>();
  readonly virtualInterfaces: Data[] = [];
  /** InstanceInfoCache.network_info by instance uuid, as saved (nova's JSON string). */
  readonly infoCaches = new Map<string, unknown>();
  /** ConsoleAuthToken rows by their token (nova keeps the hash; the fake keeps the token), with the ttl asked. */
  readonly consoleTokens = new Map<string, Data>();
  private nextId = 1;

  constructor(o: FakeConductorOptions = {}) {
    this.release = o.release ?? ZED;
    this.conductorVersion = o.conductorVersion === undefined ? this.release.serviceVersion : o.conductorVersion;
  }

  useObjectVersions(versions: ObjectVersions): void {
    this.objectVersions = versions;
  }

  ping(ctx: RpcContext): Promise<void> {
    this.calls.push({ kind: 'ping', what: 'ping', ctx });
    return Promise.resolve();
  }

  /** An Instance as the conductor sends it with a request (stored as the database row too). */
  instance(data: Data): Data {
    this.instances.set(String(data.uuid), { ...data });
    return this.prim('Instance', data);
  }

  migration(data: Data): Data {
    const row = { id: this.nextId++, ...data };
    this.migrations.set(String(data.uuid), row);
    return this.prim('Migration', row);
  }

  /** A primitive of `name` at the version this control plane's release has. */
  prim(name: string, data: Data): Data {
    return { 'nova_object.name': name, 'nova_object.namespace': 'nova', 'nova_object.version': this.release.objects[name] ?? '1.0', 'nova_object.data': { ...data }, 'nova_object.changes': [] };
  }

  classAction(ctx: RpcContext, objname: string, method: string, args: readonly unknown[], kwargs: Readonly<Record<string, unknown>> = {}): Promise<unknown> {
    this.calls.push({ kind: 'class', what: `${objname}.${method}`, args, kwargs, ctx });
    const prim = (name: string, data: Data): Data => this.prim(name, data);
    if (objname === 'Service' && method === 'get_minimum_version') {
      if (this.conductorVersion === null) return Promise.reject(new ConductorError('MessagingTimeout', `${objname}.${method}`, 'no reply'));
      return Promise.resolve(args[0] === 'nova-conductor' ? this.conductorVersion : 0);
    }
    if (objname === 'ConsoleAuthToken' && method === 'clean_console_auths_for_instance') {
      for (const [token, row] of this.consoleTokens) if (row.instance_uuid === args[0]) this.consoleTokens.delete(token);
      return Promise.resolve(null);
    }
    if (objname === 'Service' && method === 'get_by_host_and_binary') {
      const s = this.services.get(`${String(args[0])}/${String(args[1])}`);
      return Promise.resolve(s ? prim('Service', s) : null);
    }
    if (objname === 'ComputeNode' && method === 'get_by_host_and_nodename') {
      const n = this.nodes.get(`${String(args[0])}/${String(args[1])}`);
      if (!n) return Promise.reject(new ConductorError('ComputeHostNotFound', `${objname}.${method}`, `Compute host ${String(args[0])} could not be found.`));
      return Promise.resolve(prim('ComputeNode', n));
    }
    if (objname === 'VirtualInterface' && method === 'delete_by_instance_uuid') {
      const keep = this.virtualInterfaces.filter((v) => v.instance_uuid !== args[0]);
      this.virtualInterfaces.splice(0, this.virtualInterfaces.length, ...keep);
      return Promise.resolve(null);
    }
    if (objname === 'VirtualInterface' && method === 'get_by_uuid') {
      // nova answers None for a port it has no row for.
      const row = this.virtualInterfaces.find((v) => v.uuid === args[0]);
      return Promise.resolve(row ? prim('VirtualInterface', row) : null);
    }
    if (objname === 'BlockDeviceMappingList' && method === 'get_by_instance_uuid') {
      const rows = [...this.bdms.values()].filter((r) => r.instance_uuid === args[0]);
      return Promise.resolve(prim('BlockDeviceMappingList', { objects: rows.map((r) => prim('BlockDeviceMapping', r)) }));
    }
    if (method === 'get_by_uuid' && (objname === 'Instance' || objname === 'Migration')) {
      const r = (objname === 'Instance' ? this.instances : this.migrations).get(String(args[0]));
      if (!r) return Promise.reject(new ConductorError(`${objname}NotFound`, `${objname}.${method}`, 'no such row'));
      return Promise.resolve(prim(objname, r));
    }
    return Promise.resolve(null); // InstanceActionEvent.*: nothing to return (want_result false)
  }

  objectAction(ctx: RpcContext, objinst: Readonly<Record<string, unknown>>, method: string, args: readonly unknown[] = [], kwargs: Readonly<Record<string, unknown>> = {}, bound: CallBound = {}): Promise<ObjectActionReply> {
    const name = String(objinst['nova_object.name']);
    const changes = (objinst['nova_object.changes'] as string[] | undefined) ?? [];
    const data = dataOf(objinst);
    this.calls.push({ kind: 'object', what: `${name}.${method}`, changes, kwargs, data: { ...data }, ctx, timeoutMs: bound.timeoutMs });
    const changed: Data = Object.fromEntries(changes.map((k) => [k, data[k]]));
    // nova's ConsoleAuthToken.authorize(ttl): a new row (refused for one that has an id), its token the result.
    if (name === 'ConsoleAuthToken' && method === 'authorize') {
      if (data.id !== undefined) return Promise.reject(new ConductorError('ObjectActionError', `${name}.${method}`, 'must be a new object to authorize'));
      const token = randomUUID();
      const row: Data = { ...changed, id: this.nextId++, expires: Math.floor(Date.now() / 1000) + Number(args[0]), token };
      this.consoleTokens.set(token, { ...row, ttl: args[0] });
      return Promise.resolve({ updates: row, result: token });
    }
    // nova's InstanceInfoCache.save writes the changed network_info of the instance's cache row.
    if (name === 'InstanceInfoCache' && method === 'save') {
      if (changes.includes('network_info')) this.infoCaches.set(String(data.instance_uuid), data.network_info);
      return Promise.resolve({ updates: {}, result: null });
    }
    if (method === 'create') {
      const row: Data = { ...changed, id: this.nextId++, uuid: changed.uuid ?? randomUUID() };
      if (name === 'Service') this.services.set(`${String(row.host)}/${String(row.binary)}`, row);
      if (name === 'ComputeNode') this.nodes.set(`${String(row.host)}/${String(row.hypervisor_hostname)}`, row);
      if (name === 'InstanceFault') this.faults.push(row);
      if (name === 'VirtualInterface') this.virtualInterfaces.push(row);
      if (name === 'BlockDeviceMapping') this.bdms.set(Number(row.id), row);
      return Promise.resolve({ updates: row, result: null });
    }
    if (name === 'VirtualInterface' && method === 'destroy') {
      const at = this.virtualInterfaces.findIndex((v) => v.id === data.id);
      if (at < 0) return Promise.reject(new ConductorError('VirtualInterfaceNotFound', `${name}.${method}`, 'no such row'));
      this.virtualInterfaces.splice(at, 1);
      return Promise.resolve({ updates: {}, result: null });
    }
    const table = { Service: [...this.services.values()], ComputeNode: [...this.nodes.values()], Instance: [...this.instances.values()], Migration: [...this.migrations.values()], BlockDeviceMapping: [...this.bdms.values()] }[name] ?? [];
    const row = table.find((r) => (data.id !== undefined && r.id === data.id) || (data.uuid !== undefined && r.uuid === data.uuid));
    if (!row) return Promise.reject(new ConductorError(`${name}NotFound`, `${name}.${method}`, 'no such row'));
    if (method === 'destroy' && name === 'BlockDeviceMapping') {
      this.bdms.delete(Number(row.id));
      return Promise.resolve({ updates: {}, result: null });
    }
    if (method === 'destroy') {
      this.instances.delete(String(row.uuid));
      return Promise.resolve({ updates: {}, result: null });
    }
    if (name === 'Instance' && changes.includes('node') && !changes.includes('compute_id') && atLeast(String(objinst['nova_object.version']), 2, 8)) {
      return Promise.reject(new ConductorError('ObjectActionError', `${name}.${method}`, `Instance.node is being updated (${JSON.stringify(data.node)}) but compute_id is not`));
    }
    if ('expected_task_state' in kwargs) {
      const want = kwargs.expected_task_state;
      const ok = Array.isArray(want) ? want.includes(row.task_state ?? null) : want === (row.task_state ?? null);
      if (!ok) return Promise.reject(new ConductorError('UnexpectedTaskStateError', `${name}.save`, `expected ${JSON.stringify(want)}, actual ${String(row.task_state)}`));
    }
    if (name === 'Service' && typeof changed.report_count === 'number' && changed.report_count > Number(row.report_count ?? 0)) row.last_seen_up = new Date().toISOString();
    Object.assign(row, changed);
    return Promise.resolve({ updates: { ...changed }, result: null });
  }

  schedulerFanout(ctx: RpcContext, method: string, args: Readonly<Record<string, unknown>>): Promise<void> {
    this.calls.push({ kind: 'fanout', what: method, args: [args], ctx });
    return this.fanoutError ? Promise.reject(this.fanoutError) : Promise.resolve();
  }

  /** The calls of one kind, as `what` names, in order. */
  names(filter: (c: ConductorCall) => boolean = () => true): string[] {
    return this.calls.filter(filter).map((c) => c.what);
  }
}
