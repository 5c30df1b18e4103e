/**
 * The control-plane port in nova mode: each flow step becomes the writes nova-compute makes
 * through nova-conductor (nova `compute/manager.py`; docs/nova-control-plane.md), as the step's
 * row in the transition table (`agent/compute/transitions.ts`) names them: `Instance.save` with
 * the fields the step changed and the `expected_task_state` nova checks, `Migration.save` with the
 * new status, `InstanceActionEvent` start/finish per method, `InstanceFault.create` for a step
 * that records a fault, `Instance.destroy`, and the scheduler fanout (`update_instance_info`,
 * `delete_instance_info`).
 *
 * Objects are saved from the primitives nova sent with the request (`received`), so fields this
 * agent does not model (flavor ids, system metadata, the migration's id) go back unchanged and
 * only the named `changes` are written (the latest of each is kept in `object-cache.ts`). Objects
 * move between hosts as those primitives too.
 *
 * A failed write is logged, never thrown: a flow that has already changed the host does not undo
 * it because the conductor was unreachable (nova's periodic tasks would heal the record; the
 * agent's audit reports allocation drift).
 */
import { libvirtLiveMigrateData } from './live-migrate-data';
import type { LiveMigrateData } from '../../virt-drivers/types';
import type { BlockDeviceChange, ConsoleAuthorization, ControlPlane, NetworkChange } from '../compute/control-plane';
import { rowOf, stateAfter, type FlowStep, type InstanceState, type NovaHook, type NovaValue } from '../compute/transitions';
import type { DecodedMigration } from '../compute/decode';
import type { Flavor, InstanceRecord, MigrationRecord } from '../../model/instance';
import type { BlockDevice } from '../../model/block-device';
import type { RequestContext } from '../compute/ports';
import type { Logger } from '../../lib/logging/logger';
import type { Conductor } from './conductor';
import { ConductorError } from './conductor';
import { applyUpdates, hasField, isPrimitive, novaTime, primitive, withChanges, type Primitive } from './objects';
import { elevated, NovaObjectCache } from './object-cache';
import { NovaNetworkRecords } from './network-records';
import { NovaBlockDeviceRecords } from './block-device-records';
import { authorizeConsoleToken, cleanConsoleTokens } from './console-tokens';

type Fields = Readonly<Record<string, unknown>>;

/** The size `field` of the Instance (`instance_type_id`: the id) from a Flavor primitive; undefined without one. */
function flavorSize(flavor: unknown, field: string): unknown {
  return isPrimitive(flavor, 'Flavor') ? (flavor['nova_object.data'] as Fields)[field === 'instance_type_id' ? 'id' : field] : undefined;
}

/** nova keeps this much of a fault's message (`exception_to_dict`). */
const FAULT_MESSAGE_CHARS = 255;

/** The instance a step is about, as its writes need it. */
interface Subject {
  readonly uuid: string;
  /** The state the step moves the instance to (from the transition table). */
  readonly state: Partial<InstanceState>;
  readonly migration: MigrationRecord | undefined;
  /** The record's `shelved` (nova's shelved_* system metadata). */
  readonly shelved?: InstanceRecord['shelved'];
}

/** nova's system metadata keys of a shelved instance (`compute_utils.remove_shelved_keys_from_system_metadata`). */
const SHELVED_KEYS = ['shelved_at', 'shelved_image_id', 'shelved_host'];

export interface NovaControlPlaneOptions {
  readonly conductor: Conductor;
  readonly host: string;
  /** `[DEFAULT] my_ip`: the Migration's `dest_host` when this host is a move's destination. */
  readonly myIp: string;
  /** This host's ComputeNode id in nova, once registered (`compute_id`, `dest_compute_id`). */
  readonly computeNodeId: () => number | undefined;
  readonly logger: Logger;
  readonly now?: () => Date;
  /** This host serves consoles (`[vnc]` or `[serial_console]` enabled): their tokens are cleaned where the table says. */
  readonly consoles?: boolean;
}

/** Instance saves per step: the fields written and the task state nova expects (undefined: no check). */
type InstanceSave = ({ readonly fields: Fields } | { readonly set: Readonly<Record<string, NovaValue>>; readonly subject: Subject }) & {
  readonly expected?: string | null | ReadonlyArray<string | null>;
};

/** Ownership: owns the object cache and the new flavors of moves in progress. */
export class NovaControlPlane implements ControlPlane {
  readonly schedulerClaims = true;
  readonly releasesFailedBuilds = true;
  /** Called after a step that changed what this host's instances use (the daemon reports usage). */
  onUsageChanged: (() => void) | undefined;
  private readonly objects: NovaObjectCache;
  /** The Flavor a resize or migration goes to, per instance (prep_resize's `flavor`). */
  private readonly newFlavors = new Map<string, Primitive>();
  private readonly log: Logger;
  private readonly networkRecords: NovaNetworkRecords;
  private readonly blockDevices: NovaBlockDeviceRecords;

  constructor(private readonly o: NovaControlPlaneOptions) {
    this.log = o.logger.child({ component: 'nova-control-plane' });
    this.objects = new NovaObjectCache(o.conductor, this.log);
    this.networkRecords = new NovaNetworkRecords(o.conductor, this.log);
    this.blockDevices = new NovaBlockDeviceRecords(o.conductor, this.log);
  }

  network(uuid: string, change: NetworkChange, ctx: RequestContext): Promise<void> {
    return this.networkRecords.write(uuid, change, ctx);
  }

  blockDevice(uuid: string, bdmId: number, change: BlockDeviceChange, ctx: RequestContext): Promise<void> {
    return this.blockDevices.save(uuid, bdmId, change, ctx);
  }

  createBlockDevice(uuid: string, fields: Readonly<Record<string, unknown>>, ctx: RequestContext): Promise<{ id: number | null; reply: unknown }> {
    return this.blockDevices.create(uuid, fields, ctx);
  }

  destroyBlockDevice(uuid: string, bdmId: number, ctx: RequestContext): Promise<void> {
    return this.blockDevices.destroy(uuid, bdmId, ctx);
  }

  blockDevicesOf(uuid: string, ctx: RequestContext): Promise<readonly BlockDevice[]> {
    return this.blockDevices.list(uuid, ctx);
  }

  received(args: Readonly<Record<string, unknown>>): void {
    const inst = args.instance;
    if (isPrimitive(inst, 'Instance')) {
      const uuid = (inst['nova_object.data'] as Fields).uuid;
      if (typeof uuid === 'string') {
        this.objects.keepInstance(uuid, inst);
        if (isPrimitive(args.flavor, 'Flavor')) this.newFlavors.set(uuid, args.flavor);
      }
    }
    const mig = args.migration;
    if (isPrimitive(mig, 'Migration')) {
      const uuid = (mig['nova_object.data'] as Fields).uuid;
      if (typeof uuid === 'string') this.objects.keepMigration(uuid, mig);
    }
  }

  async step(rec: InstanceRecord, step: FlowStep, ctx: RequestContext, fault?: string): Promise<void> {
    try {
      await this.perform(step, { uuid: rec.uuid, state: stateAfter(step, rec), migration: rec.migration, ...(rec.shelved ? { shelved: rec.shelved } : {}) }, ctx, fault);
    } catch (e) {
      this.log.warn({ instance: rec.uuid, step, reason: e instanceof Error ? e.message : String(e) }, 'nova-conductor did not take a step; nova may show a stale state');
    }
    if (rowOf(step).nova?.usage) this.onUsageChanged?.();
  }

  async deleted(uuid: string, rec: InstanceRecord | undefined, ctx: RequestContext): Promise<void> {
    try {
      const known = this.objects.instance(uuid) !== undefined;
      if (!known) this.log.warn({ instance: uuid }, 'terminate without the Instance object; nothing to destroy in nova');
      await this.perform('delete.end', { uuid, state: stateAfter('delete.end', rec), migration: rec?.migration }, ctx, undefined, known);
    } catch (e) {
      this.log.warn({ instance: uuid, had_record: rec !== undefined, reason: e instanceof Error ? e.message : String(e) }, 'nova-conductor did not take the delete');
    } finally {
      this.objects.forgetInstance(uuid);
      this.onUsageChanged?.();
    }
  }

  /**
   * ERROR with a fault, task state cleared (nova's API set it before casting), when nova places the
   * instance on this host; an instance nova places elsewhere (a cast that crossed a move) is left.
   */
  async lost(uuid: string, method: string, ctx: RequestContext): Promise<void> {
    try {
      const inst = await this.objects.instanceOrRead(ctx, uuid);
      const on = inst ? (inst['nova_object.data'] as Fields).host : undefined;
      if (on !== this.o.host) {
        this.log.warn({ instance: uuid, method, nova_host: on ?? null }, 'a cast named an instance this host has no record of, and nova does not place here; left as nova has it');
        return;
      }
      const fault = `${method} not done: instance ${uuid} is not on compute-agent host ${this.o.host}`;
      await this.createFault(ctx, uuid, fault);
      await this.saveInstance(ctx, uuid, { fields: { vm_state: 'error', task_state: null } });
      this.log.warn({ instance: uuid, method }, `${fault}; put in ERROR`);
    } catch (e) {
      this.log.warn({ instance: uuid, method, reason: e instanceof Error ? e.message : String(e) }, 'nova-conductor did not take the ERROR of an instance this host has no record of');
    } finally {
      this.objects.forgetInstance(uuid);
    }
  }

  instanceArg(rec: InstanceRecord, flavor?: Flavor): Record<string, unknown> {
    const inst = this.objects.instance(rec.uuid);
    if (!inst) return { uuid: rec.uuid, display_name: rec.name, project_id: rec.project_id, user_id: rec.user_id, flavor: flavor ?? rec.flavor, vm_state: rec.vm_state };
    return { ...inst, 'nova_object.changes': [] };
  }

  instanceRef(uuid: string): Record<string, unknown> {
    const inst = this.objects.instance(uuid);
    return inst ? { ...inst, 'nova_object.changes': [] } : { uuid };
  }

  migrationArg(m: MigrationRecord | DecodedMigration): Record<string, unknown> {
    const mig = this.objects.migration(m.uuid);
    if (mig) return { ...mig, 'nova_object.changes': [] };
    return { uuid: m.uuid, migration_type: 'type' in m ? m.type : m.migration_type, source_compute: m.source_compute, dest_compute: m.dest_compute };
  }
  liveMigrateData(rec: InstanceRecord, data: LiveMigrateData): unknown {
    return libvirtLiveMigrateData(rec, data, this.o.conductor.objectVersions);
  }

  authorizeConsole(console: ConsoleAuthorization, ttlS: number, ctx: RequestContext): Promise<{ token: string; accessUrl: string }> {
    return authorizeConsoleToken(this.o.conductor, console, ttlS, ctx);
  }


  /** Writes what `step`'s row says nova-compute writes, in the row's order (`instanceWrites` false: none to the Instance). */
  private async perform(step: FlowStep, s: Subject, ctx: RequestContext, fault: string | undefined, instanceWrites = true): Promise<void> {
    const w = rowOf(step).nova;
    if (!w) return;
    if (w.migration) {
      const uuid = s.migration?.uuid ?? (w.migration.orLatest ? this.objects.lastMigrationOf(s.uuid) : undefined);
      await this.saveMigration(ctx, uuid, s, w.migration.set ?? {}, w.migration.status);
    }
    let saved: Primitive | undefined;
    if (instanceWrites) {
      // The fault first, as nova-compute adds it before it sets ERROR: nova-api shows an ERROR
      // server's fault from that row, so a reader who sees ERROR also sees why.
      if (w.fault && fault !== undefined) await this.createFault(ctx, s.uuid, fault);
      for (const save of w.instance ?? []) saved = await this.saveInstance(ctx, s.uuid, { set: save.set, subject: s, expected: save.expected });
      if (w.hook) await this.hooks[w.hook](ctx, s.uuid, saved);
    }
    if (w.fanout === 'update_instance_info' && saved) await this.fanout(ctx, w.fanout, { host_name: this.o.host, instance_info: primitive('InstanceList', { objects: [saved] }, this.o.conductor.objectVersions) });
    if (w.fanout === 'delete_instance_info') await this.fanout(ctx, w.fanout, { host_name: this.o.host, instance_uuid: s.uuid });
    if (w.consoleTokens === 'clean' && this.o.consoles) await cleanConsoleTokens(this.o.conductor, s.uuid, ctx, this.log);
    if (w.event) await this.event(ctx, s.uuid, w.event.name, w.event.phase, w.event.failure === undefined ? undefined : (fault ?? w.event.failure));
  }

  /**
   * The scheduler fanout: a hint (a scheduler whose view of a host is not synced reads the host's
   * instances from the database), so a cast that fails is logged and the step's action event is
   * still written.
   */
  private async fanout(ctx: RequestContext, method: string, args: Fields): Promise<void> {
    try {
      await this.o.conductor.schedulerFanout(elevated(ctx), method, args);
    } catch (e) {
      this.log.warn({ method, reason: e instanceof Error ? e.message : String(e) }, 'scheduler fanout not sent; the schedulers learn it at their next host sync');
    }
  }

  /** The steps whose writes are not field values (`NovaHook`). */
  private readonly hooks: Readonly<Record<NovaHook, (ctx: RequestContext, uuid: string, saved: Primitive | undefined) => Promise<void>>> = {
    stash_new_flavor: async (ctx, uuid) => {
      const flavor = this.newFlavors.get(uuid);
      if (flavor) await this.saveInstance(ctx, uuid, { fields: { new_flavor: { ...flavor, 'nova_object.changes': [] } } });
    },
    destroy: async (ctx, uuid, saved) => {
      const inst = saved ?? this.objects.instance(uuid);
      if (inst) await this.o.conductor.objectAction(elevated(ctx), inst, 'destroy');
    },
    forget_instance: (_ctx, uuid) => {
      this.objects.forgetInstance(uuid);
      return Promise.resolve();
    },
  };

  /** The values a row names, resolved for `s` now; only the fields `target`'s version has. */
  private async values(ctx: RequestContext, set: Readonly<Record<string, NovaValue>>, s: Subject, target: Primitive): Promise<Fields> {
    const value = async (field: string, v: NovaValue): Promise<unknown> => {
      switch (v) {
        case 'state':
          return s.state[field as keyof InstanceState];
        case 'now':
          return novaTime(this.now());
        case 'shelved_sysmeta':
        case 'unshelved_sysmeta': {
          const sys = Object.fromEntries(Object.entries((this.objects.field(s.uuid, 'system_metadata') ?? {}) as Record<string, unknown>).filter(([k]) => !SHELVED_KEYS.includes(k)));
          if (v === 'unshelved_sysmeta' || !s.shelved) return sys;
          return { ...sys, shelved_at: s.shelved.at, shelved_image_id: s.shelved.image_id, shelved_host: this.o.host };
        }
        case 'this_host':
          return this.o.host;
        case 'this_ip':
          return this.o.myIp;
        case 'this_node_id':
          return this.o.computeNodeId();
        case 'move_dest':
          return s.migration?.dest_compute;
        case 'move_dest_node_id':
          return this.destNodeId(ctx, s);
        case 'flavor':
          return this.objects.field(s.uuid, 'flavor');
        case 'old_flavor':
          return this.objects.field(s.uuid, 'old_flavor') ?? this.objects.field(s.uuid, 'flavor');
        case 'new_flavor':
          return this.newFlavorOf(s.uuid);
        case 'new_flavor_field':
          return flavorSize(this.newFlavorOf(s.uuid), field);
        case 'old_flavor_field':
          return flavorSize(this.objects.field(s.uuid, 'old_flavor') ?? this.objects.field(s.uuid, 'flavor'), field);
        case 'migration_context':
          return this.migrationContext(s);
        default:
          return v;
      }
    };
    const out: Record<string, unknown> = {};
    for (const [field, v] of Object.entries(set)) if (hasField(target, field)) out[field] = await value(field, v);
    return out;
  }

  /**
   * A MigrationContext of the move (nova's resize claim makes one): the Migration's integer id,
   * the rest empty (this agent moves no NUMA topology, PCI devices or resources with it). Undefined
   * when nova's Migration is not known here (nothing is written).
   */
  private migrationContext(s: Subject): Primitive | undefined {
    const mig = s.migration ? this.objects.migration(s.migration.uuid) : undefined;
    const id = mig ? (mig['nova_object.data'] as Fields).id : undefined;
    if (typeof id !== 'number') return undefined;
    const empty = ['new_numa_topology', 'old_numa_topology', 'new_pci_devices', 'old_pci_devices', 'new_pci_requests', 'old_pci_requests', 'new_resources', 'old_resources'];
    return primitive('MigrationContext', { instance_uuid: s.uuid, migration_id: id, ...Object.fromEntries(empty.map((f) => [f, null])) }, this.o.conductor.objectVersions);
  }

  /**
   * The ComputeNode id of the move's destination (nova's `Migration.get_dest_compute_id`): the
   * Migration's `dest_compute_id`, which the destination set when it claimed the move, else the
   * node nova has for the destination host. Undefined when neither is known (nothing is written).
   */
  private async destNodeId(ctx: RequestContext, s: Subject): Promise<number | undefined> {
    const mig = s.migration ? this.objects.migration(s.migration.uuid) : undefined;
    const id = mig ? (mig['nova_object.data'] as Fields).dest_compute_id : undefined;
    if (typeof id === 'number') return id;
    const dest = s.migration?.dest_compute;
    if (!dest) return undefined;
    const node = await this.o.conductor.classAction(elevated(ctx), 'ComputeNode', 'get_by_host_and_nodename', [dest, dest]).catch((e: unknown) => {
      if (!(e instanceof ConductorError)) throw e;
      this.log.warn({ host: dest, reason: e.message }, "cannot read the destination's compute node from nova");
      return undefined;
    });
    const nodeId = isPrimitive(node, 'ComputeNode') ? (node['nova_object.data'] as Fields).id : undefined;
    return typeof nodeId === 'number' ? nodeId : undefined;
  }

  /** `Instance.save` from the latest primitive; returns the saved primitive, or undefined without one. */
  private async saveInstance(ctx: RequestContext, uuid: string, save: InstanceSave): Promise<Primitive | undefined> {
    const base = await this.objects.instanceOrRead(ctx, uuid);
    if (!base) {
      this.log.warn({ instance: uuid, fields: Object.keys('fields' in save ? save.fields : save.set) }, 'no Instance object from nova for this instance; save skipped');
      return undefined;
    }
    const obj = withChanges(base, 'fields' in save ? save.fields : await this.values(ctx, save.set, save.subject, base));
    const kwargs = save.expected === undefined ? {} : { expected_task_state: save.expected };
    const reply = await this.o.conductor.objectAction(elevated(ctx), obj, 'save', [], kwargs);
    const next = applyUpdates(obj, reply.updates);
    this.objects.keepInstance(uuid, next);
    return next;
  }

  private async saveMigration(ctx: RequestContext, uuid: string | undefined, s: Subject, set: Readonly<Record<string, NovaValue>>, status: string | undefined): Promise<void> {
    const base = uuid ? await this.objects.migrationOrRead(ctx, uuid) : undefined;
    if (!base || !uuid) {
      this.log.warn({ migration: uuid, fields: Object.keys(set) }, 'no Migration object from nova for this move; save skipped');
      return;
    }
    const obj = withChanges(base, { ...(await this.values(ctx, set, s, base)), ...(status === undefined ? {} : { status }) });
    const reply = await this.o.conductor.objectAction(elevated(ctx), obj, 'save');
    this.objects.keepMigration(uuid, applyUpdates(obj, reply.updates));
  }

  /** The Flavor a move of `uuid` goes to: the Instance's new_flavor, else prep_resize's flavor. */
  private newFlavorOf(uuid: string): unknown {
    const stashed = this.newFlavors.get(uuid);
    return this.objects.field(uuid, 'new_flavor') ?? (stashed ? { ...stashed, 'nova_object.changes': [] } : undefined);
  }

  /**
   * `InstanceFault.create`, as nova's `add_instance_fault_from_exc` writes it for an error that is
   * not a NovaException: code 500, the message cut to nova's 255 characters, no traceback.
   */
  private async createFault(ctx: RequestContext, uuid: string, message: string): Promise<void> {
    const data = { host: this.o.host, instance_uuid: uuid, message: message.slice(0, FAULT_MESSAGE_CHARS), code: 500, details: '' };
    await this.o.conductor.objectAction(elevated(ctx), primitive('InstanceFault', data, this.o.conductor.objectVersions), 'create');
  }

  /** `InstanceActionEvent.event_start` / `event_finish_with_failure`, under the request's own id (nova finds the action by it). */
  private async event(ctx: RequestContext, uuid: string, name: string, phase: 'start' | 'finish', failure?: string): Promise<void> {
    const c = elevated(ctx);
    if (phase === 'start') await this.o.conductor.classAction(c, 'InstanceActionEvent', 'event_start', [uuid, name], { want_result: false, host: this.o.host });
    // nova records a failure only with a traceback (`pack_action_event_finish`: no exc_tb is
    // 'Success'); the agent's failure has no Python traceback, so its text stands in for one.
    else await this.o.conductor.classAction(c, 'InstanceActionEvent', 'event_finish_with_failure', [uuid, name], { exc_val: failure ?? null, exc_tb: failure === undefined ? null : `compute-agent: ${failure}\n`, want_result: false });
  }

  private now(): Date {
    return (this.o.now ?? (() => new Date()))();
  }
}
