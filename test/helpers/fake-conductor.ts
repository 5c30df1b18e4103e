/**
 * An in-memory nova-conductor for unit tests of nova mode, with nova's rules where the agent can
 * get them wrong: a save writes only the fields named in `nova_object.changes`; `Instance.save`
 * with `expected_task_state` raises UnexpectedTaskStateError when the stored task state differs;
 * `Service.save` bumps `last_seen_up` only when `report_count` grows; unknown compute nodes raise
 * ComputeHostNotFound. Every call is recorded.
 */
import { randomUUID } from 'node:crypto';
import { ConductorError, type Conductor, type ObjectActionReply } from '../../agent/nova/conductor';
import type { RpcContext } from '../../agent/rpc/oslo/messages';

type Data = Record<string, unknown>;

export interface ConductorCall {
  readonly kind: 'class' | 'object' | 'fanout' | 'ping';
  /** e.g. `Instance.save`, `InstanceActionEvent.event_start`, `update_instance_info`. */
  readonly what: string;
  readonly changes?: readonly string[];
  readonly args?: readonly unknown[];
  readonly kwargs?: Readonly<Record<string, unknown>>;
  readonly ctx: RpcContext;
}

const dataOf = (o: Readonly<Record<string, unknown>>): Data => o['nova_object.data'] as Data;
const prim = (name: string, data: Data): Data => ({ 'nova_object.name': name, 'nova_object.namespace': 'nova', 'nova_object.version': '1.0', 'nova_object.data': { ...data }, 'nova_object.changes': [] });

export class FakeConductor implements Conductor {
  readonly calls: ConductorCall[] = [];
  readonly services = new Map<string, Data>();
  readonly nodes = new Map<string, Data>();
  readonly instances = new Map<string, Data>();
  readonly migrations = new Map<string, Data>();
  private nextId = 1;

  ping(ctx: RpcContext): Promise<void> {
    this.calls.push({ kind: 'ping', what: 'ping', ctx });
    return Promise.resolve();
  }

  /** An Instance as the conductor sends it with a request (stored as the database row too). */
  instance(data: Data): Data {
    this.instances.set(String(data.uuid), { ...data });
    return prim('Instance', data);
  }

  migration(data: Data): Data {
    const row = { id: this.nextId++, ...data };
    this.migrations.set(String(data.uuid), row);
    return prim('Migration', row);
  }

  classAction(ctx: RpcContext, objname: string, method: string, args: readonly unknown[], kwargs: Readonly<Record<string, unknown>> = {}): Promise<unknown> {
    this.calls.push({ kind: 'class', what: `${objname}.${method}`, args, kwargs, ctx });
    if (objname === 'Service' && method === 'get_by_host_and_binary') {
      const s = this.services.get(`${String(args[0])}/${String(args[1])}`);
      return Promise.resolve(s ? prim('Service', s) : null);
    }
    if (objname === 'ComputeNode' && method === 'get_by_host_and_nodename') {
      const n = this.nodes.get(`${String(args[0])}/${String(args[1])}`);
      if (!n) return Promise.reject(new ConductorError('ComputeHostNotFound', `${objname}.${method}`, `Compute host ${String(args[0])} could not be found.`));
      return Promise.resolve(prim('ComputeNode', n));
    }
    if (method === 'get_by_uuid' && (objname === 'Instance' || objname === 'Migration')) {
      const r = (objname === 'Instance' ? this.instances : this.migrations).get(String(args[0]));
      if (!r) return Promise.reject(new ConductorError(`${objname}NotFound`, `${objname}.${method}`, 'no such row'));
      return Promise.resolve(prim(objname, r));
    }
    return Promise.resolve(null); // InstanceActionEvent.*: nothing to return (want_result false)
  }

  objectAction(ctx: RpcContext, objinst: Readonly<Record<string, unknown>>, method: string, _args: readonly unknown[] = [], kwargs: Readonly<Record<string, unknown>> = {}): Promise<ObjectActionReply> {
    const name = String(objinst['nova_object.name']);
    const changes = (objinst['nova_object.changes'] as string[] | undefined) ?? [];
    this.calls.push({ kind: 'object', what: `${name}.${method}`, changes, kwargs, ctx });
    const data = dataOf(objinst);
    const changed: Data = Object.fromEntries(changes.map((k) => [k, data[k]]));
    if (method === 'create') {
      const row: Data = { ...changed, id: this.nextId++, uuid: changed.uuid ?? randomUUID() };
      if (name === 'Service') this.services.set(`${String(row.host)}/${String(row.binary)}`, row);
      if (name === 'ComputeNode') this.nodes.set(`${String(row.host)}/${String(row.hypervisor_hostname)}`, row);
      return Promise.resolve({ updates: row, result: null });
    }
    const table = { Service: [...this.services.values()], ComputeNode: [...this.nodes.values()], Instance: [...this.instances.values()], Migration: [...this.migrations.values()] }[name] ?? [];
    const row = table.find((r) => (data.id !== undefined && r.id === data.id) || (data.uuid !== undefined && r.uuid === data.uuid));
    if (!row) return Promise.reject(new ConductorError(`${name}NotFound`, `${name}.${method}`, 'no such row'));
    if (method === 'destroy') {
      this.instances.delete(String(row.uuid));
      return Promise.resolve({ updates: {}, result: null });
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
    return Promise.resolve();
  }

  /** The calls of one kind, as `what` names, in order. */
  names(filter: (c: ConductorCall) => boolean = () => true): string[] {
    return this.calls.filter(filter).map((c) => c.what);
  }
}
