/**
 * The control-plane port in nova mode: each flow step becomes the writes nova-compute makes
 * through nova-conductor (nova-control-plane.md section 3; nova `compute/manager.py`):
 * `Instance.save` with the fields the step changed and the `expected_task_state` nova checks,
 * `Migration.save` with the new status, `InstanceActionEvent` start/finish for builds and deletes,
 * `Instance.destroy`, and the scheduler fanout (`update_instance_info`, `delete_instance_info`).
 *
 * Objects are saved from the primitives nova sent with the request (`received`), so fields this
 * agent does not model (flavor ids, system metadata, the migration's id) go back unchanged and
 * only the named `changes` are written. Objects move between hosts as those primitives too.
 *
 * A failed write is logged, never thrown: a flow that has already changed the host does not undo
 * it because the conductor was unreachable (nova's periodic tasks would heal the record; the
 * agent's audit reports allocation drift).
 */
import type { ControlPlane, FlowStep } from '../compute/control-plane';
import type { DecodedMigration } from '../compute/decode';
import type { Flavor, InstanceRecord, MigrationRecord } from '../../model/instance';
import type { RequestContext } from '../compute/ports';
import type { Logger } from '../../lib/logging/logger';
import type { Conductor } from './conductor';
import { applyUpdates, isPrimitive, novaTime, primitive, withChanges, type Primitive } from './objects';

type Fields = Readonly<Record<string, unknown>>;

/** Steps after which the instances on this host use something else. */
const USAGE_STEPS: ReadonlySet<FlowStep> = new Set<FlowStep>(['create.end', 'create.error', 'resize_prep.end', 'resize_confirm.end', 'resize_revert.dest', 'resize_revert.end', 'live_migration_post.end', 'live_migration_post_dest.end', 'live_migration_abort.end']);

export interface NovaControlPlaneOptions {
  readonly conductor: Conductor;
  readonly host: string;
  readonly logger: Logger;
  readonly now?: () => Date;
}

/** Instance saves per step: the fields written and the task state nova expects (undefined: no check). */
interface InstanceSave {
  readonly fields: Fields;
  readonly expected?: string | null | ReadonlyArray<string | null>;
}

/** Ownership: keeps the latest primitive of each instance and migration this host is working on. */
export class NovaControlPlane implements ControlPlane {
  readonly schedulerClaims = true;
  /** Called after a step that changed what this host's instances use (the daemon reports usage). */
  onUsageChanged: (() => void) | undefined;
  private readonly instances = new Map<string, Primitive>();
  private readonly migrations = new Map<string, Primitive>();
  /** The Flavor a resize or migration goes to, per instance (prep_resize's `flavor`). */
  private readonly newFlavors = new Map<string, Primitive>();
  private readonly log: Logger;

  constructor(private readonly o: NovaControlPlaneOptions) {
    this.log = o.logger.child({ component: 'nova-control-plane' });
  }

  received(args: Readonly<Record<string, unknown>>): void {
    const inst = args.instance;
    if (isPrimitive(inst, 'Instance')) {
      const uuid = (inst['nova_object.data'] as Fields).uuid;
      if (typeof uuid === 'string') {
        this.instances.set(uuid, inst);
        if (isPrimitive(args.flavor, 'Flavor')) this.newFlavors.set(uuid, args.flavor);
      }
    }
    const mig = args.migration;
    if (isPrimitive(mig, 'Migration')) {
      const uuid = (mig['nova_object.data'] as Fields).uuid;
      if (typeof uuid === 'string') this.migrations.set(uuid, mig);
    }
  }

  async step(rec: InstanceRecord, step: FlowStep, ctx: RequestContext, fault?: string): Promise<void> {
    try {
      await this.apply(rec, step, ctx, fault);
    } catch (e) {
      this.log.warn({ instance: rec.uuid, step, reason: e instanceof Error ? e.message : String(e) }, 'nova-conductor did not take a step; nova may show a stale state');
    }
    if (USAGE_STEPS.has(step)) this.onUsageChanged?.();
  }

  async deleted(uuid: string, rec: InstanceRecord | undefined, ctx: RequestContext): Promise<void> {
    try {
      const inst = this.instances.get(uuid);
      if (inst) {
        const now = novaTime(this.now());
        const saved = await this.saveInstance(ctx, uuid, { fields: { vm_state: 'deleted', task_state: null, power_state: 0, terminated_at: now } });
        await this.o.conductor.objectAction(this.admin(ctx), saved ?? inst, 'destroy');
      } else {
        this.log.warn({ instance: uuid }, 'terminate without the Instance object; nothing to destroy in nova');
      }
      await this.o.conductor.schedulerFanout(this.admin(ctx), 'delete_instance_info', { host_name: this.o.host, instance_uuid: uuid });
      await this.event(ctx, uuid, 'compute_terminate_instance', 'finish');
    } catch (e) {
      this.log.warn({ instance: uuid, had_record: rec !== undefined, reason: e instanceof Error ? e.message : String(e) }, 'nova-conductor did not take the delete');
    } finally {
      this.instances.delete(uuid);
      this.onUsageChanged?.();
    }
  }

  instanceArg(rec: InstanceRecord, flavor?: Flavor): Record<string, unknown> {
    const inst = this.instances.get(rec.uuid);
    if (!inst) return { uuid: rec.uuid, display_name: rec.name, project_id: rec.project_id, user_id: rec.user_id, flavor: flavor ?? rec.flavor, vm_state: rec.vm_state };
    return { ...inst, 'nova_object.changes': [] };
  }

  instanceRef(uuid: string): Record<string, unknown> {
    const inst = this.instances.get(uuid);
    return inst ? { ...inst, 'nova_object.changes': [] } : { uuid };
  }

  migrationArg(m: MigrationRecord | DecodedMigration): Record<string, unknown> {
    const mig = this.migrations.get(m.uuid);
    if (mig) return { ...mig, 'nova_object.changes': [] };
    return { uuid: m.uuid, migration_type: 'type' in m ? m.type : m.migration_type, source_compute: m.source_compute, dest_compute: m.dest_compute };
  }

  private async apply(rec: InstanceRecord, step: FlowStep, ctx: RequestContext, fault: string | undefined): Promise<void> {
    const host = this.o.host;
    const now = novaTime(this.now());
    const mig = rec.migration;
    switch (step) {
      case 'create.start':
        return this.event(ctx, rec.uuid, 'compute__do_build_and_run_instance', 'start');
      case 'create.claimed':
        // nova's instance claim sets host and node; then the build moves on to spawning.
        await this.saveInstance(ctx, rec.uuid, { fields: { host, node: host, launched_on: host, vm_state: 'building', task_state: null }, expected: ['scheduling', null] });
        await this.saveInstance(ctx, rec.uuid, { fields: { task_state: 'spawning' }, expected: [null] });
        return;
      case 'create.end': {
        const saved = await this.saveInstance(ctx, rec.uuid, { fields: { vm_state: 'active', task_state: null, power_state: rec.power_state, launched_at: now }, expected: 'spawning' });
        if (saved) await this.o.conductor.schedulerFanout(this.admin(ctx), 'update_instance_info', { host_name: host, instance_info: primitive('InstanceList', { objects: [saved] }) });
        return this.event(ctx, rec.uuid, 'compute__do_build_and_run_instance', 'finish');
      }
      case 'create.error':
        await this.saveInstance(ctx, rec.uuid, { fields: { vm_state: 'error', task_state: null } });
        return this.event(ctx, rec.uuid, 'compute__do_build_and_run_instance', 'finish', fault ?? 'build failed');
      case 'delete.start':
        return this.event(ctx, rec.uuid, 'compute_terminate_instance', 'start');
      case 'resize_prep.end': {
        await this.saveMigration(ctx, mig, { dest_compute: host, dest_node: host, dest_host: '127.0.0.1', status: 'pre-migrating' });
        // nova stashes the target flavor on the instance here; revert and confirm read it.
        const flavor = this.newFlavors.get(rec.uuid);
        if (flavor) await this.saveInstance(ctx, rec.uuid, { fields: { new_flavor: { ...flavor, 'nova_object.changes': [] } } });
        return;
      }
      case 'resize_prep.error':
        await this.saveMigration(ctx, mig, { status: 'error' });
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { task_state: null } }));
      case 'resize.start':
        await this.saveMigration(ctx, mig, { status: 'migrating' });
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { task_state: 'resize_migrating', old_flavor: this.field(rec.uuid, 'flavor') }, expected: 'resize_prep' }));
      case 'resize.end':
        await this.saveMigration(ctx, mig, { status: 'post-migrating' });
        // The source hands the instance to the destination here, as nova-compute does.
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { host: mig?.dest_compute, node: mig?.dest_compute, task_state: 'resize_migrated' }, expected: 'resize_migrating' }));
      case 'resize.error':
      case 'resize_finish.error':
        await this.saveMigration(ctx, mig, { status: 'error' });
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { vm_state: rec.vm_state, task_state: null } }));
      case 'resize_finish.start':
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { task_state: 'resize_finish' }, expected: 'resize_migrated' }));
      case 'resize_finish.end':
        await this.saveMigration(ctx, mig, { status: 'finished' });
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { vm_state: 'resized', task_state: null, power_state: rec.power_state, launched_at: now }, expected: 'resize_finish' }));
      case 'resize_confirm.end':
        await this.saveMigration(ctx, mig, { status: 'confirmed' });
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { vm_state: mig?.old_vm_state ?? 'active', task_state: null, old_flavor: null, new_flavor: null }, expected: [null, 'deleting', 'soft-deleting'] }));
      case 'resize_revert.dest':
        return this.saveMigration(ctx, mig, { status: 'reverted' });
      case 'resize_revert.end':
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { host, node: host, vm_state: rec.vm_state, task_state: null, power_state: rec.power_state, launched_at: now, flavor: this.field(rec.uuid, 'old_flavor') ?? this.field(rec.uuid, 'flavor'), old_flavor: null, new_flavor: null }, expected: 'resize_reverting' }));
      case 'live_migration_pre.start':
        return this.saveMigration(ctx, mig, { status: 'running' });
      case 'live_migration_post_dest.end': {
        const saved = await this.saveInstance(ctx, rec.uuid, { fields: { host, node: host, power_state: rec.power_state, task_state: null, progress: 0 }, expected: 'migrating' });
        if (saved) await this.o.conductor.schedulerFanout(this.admin(ctx), 'update_instance_info', { host_name: host, instance_info: primitive('InstanceList', { objects: [saved] }) });
        return;
      }
      case 'live_migration_post.end':
        await this.saveMigration(ctx, mig, { status: 'completed' });
        this.instances.delete(rec.uuid);
        return this.o.conductor.schedulerFanout(this.admin(ctx), 'delete_instance_info', { host_name: host, instance_uuid: rec.uuid });
      case 'live_migration_abort.end':
        await this.saveMigration(ctx, mig, { status: 'error' }, this.lastMigrationOf(rec.uuid));
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { task_state: null, progress: 0 }, expected: ['migrating'] }));
      case 'power_off.error':
        return void (await this.saveInstance(ctx, rec.uuid, { fields: { vm_state: 'error', task_state: null } }));
      default:
        return; // steps nova-compute writes nothing for (the API already did): resize_prep.start, resize_revert.start
    }
  }

  /** `Instance.save` from the latest primitive; returns the saved primitive, or undefined without one. */
  private async saveInstance(ctx: RequestContext, uuid: string, save: InstanceSave): Promise<Primitive | undefined> {
    const base = this.instances.get(uuid) ?? (await this.fetchInstance(ctx, uuid));
    if (!base) {
      this.log.warn({ instance: uuid, fields: Object.keys(save.fields) }, 'no Instance object from nova for this instance; save skipped');
      return undefined;
    }
    const obj = withChanges(base, save.fields);
    const kwargs = save.expected === undefined ? {} : { expected_task_state: save.expected };
    const reply = await this.o.conductor.objectAction(this.admin(ctx), obj, 'save', [], kwargs);
    const next = applyUpdates(obj, reply.updates);
    this.instances.set(uuid, next);
    return next;
  }

  private async saveMigration(ctx: RequestContext, mig: MigrationRecord | undefined, fields: Fields, fallback?: string): Promise<void> {
    const uuid = mig?.uuid ?? fallback;
    const base = uuid ? (this.migrations.get(uuid) ?? (await this.fetchMigration(ctx, uuid))) : undefined;
    if (!base || !uuid) {
      this.log.warn({ migration: uuid, fields: Object.keys(fields) }, 'no Migration object from nova for this move; save skipped');
      return;
    }
    const obj = withChanges(base, fields);
    const reply = await this.o.conductor.objectAction(this.admin(ctx), obj, 'save');
    this.migrations.set(uuid, applyUpdates(obj, reply.updates));
  }

  /**
   * The Instance from nova when no request brought it (a step resumed after a restart: the objects
   * of requests in flight are not kept across restarts).
   */
  private async fetchInstance(ctx: RequestContext, uuid: string): Promise<Primitive | undefined> {
    const got = await this.o.conductor.classAction(this.admin(ctx), 'Instance', 'get_by_uuid', [uuid], { expected_attrs: ['flavor', 'system_metadata'] }).catch((e: unknown) => {
      this.log.warn({ instance: uuid, reason: e instanceof Error ? e.message : String(e) }, 'cannot read the Instance from nova');
      return undefined;
    });
    if (!isPrimitive(got, 'Instance')) return undefined;
    this.instances.set(uuid, got);
    return got;
  }

  /** The Migration from nova when no request brought it (resumed after a restart). */
  private async fetchMigration(ctx: RequestContext, uuid: string): Promise<Primitive | undefined> {
    const got = await this.o.conductor.classAction(this.admin(ctx), 'Migration', 'get_by_uuid', [uuid]).catch((e: unknown) => {
      this.log.warn({ migration: uuid, reason: e instanceof Error ? e.message : String(e) }, 'cannot read the Migration from nova');
      return undefined;
    });
    if (!isPrimitive(got, 'Migration')) return undefined;
    this.migrations.set(uuid, got);
    return got;
  }

  /** A field of the latest Instance primitive (nested objects as primitives). */
  private field(uuid: string, name: string): unknown {
    const inst = this.instances.get(uuid);
    return inst ? (inst['nova_object.data'] as Fields)[name] : undefined;
  }

  private lastMigrationOf(instance: string): string | undefined {
    let found: string | undefined;
    for (const [uuid, m] of this.migrations) if ((m['nova_object.data'] as Fields).instance_uuid === instance) found = uuid;
    return found;
  }

  /** `InstanceActionEvent.event_start` / `event_finish_with_failure`, under the request's own id (nova finds the action by it). */
  private async event(ctx: RequestContext, uuid: string, name: string, phase: 'start' | 'finish', failure?: string): Promise<void> {
    const c = this.admin(ctx);
    if (phase === 'start') await this.o.conductor.classAction(c, 'InstanceActionEvent', 'event_start', [uuid, name], { want_result: false, host: this.o.host });
    else await this.o.conductor.classAction(c, 'InstanceActionEvent', 'event_finish_with_failure', [uuid, name], { exc_val: failure ?? null, exc_tb: null, want_result: false });
  }

  /** nova-compute writes with its service authority on behalf of the request (`context.elevated()`). */
  private admin(ctx: RequestContext): RequestContext {
    return { ...ctx, is_admin: true };
  }

  private now(): Date {
    return (this.o.now ?? (() => new Date()))();
  }
}
