/**
 * The latest primitive of each Instance and Migration this host is working on in nova mode: as a
 * request brought it, as a save returned it, or read from nova-conductor when no request brought
 * one (a step resumed after a restart: the objects of requests in flight are not kept across
 * restarts).
 *
 * It is: the cache and its reads. It is not: the writes (`control-plane.ts` decides what a step
 * saves).
 */
import type { Logger } from '../../lib/logging/logger';
import type { RequestContext } from '../compute/ports';
import type { Conductor } from './conductor';
import { isPrimitive, type Primitive } from './objects';

type Fields = Readonly<Record<string, unknown>>;

/** nova-compute reads and writes with its service authority on behalf of the request (`context.elevated()`). */
export function elevated(ctx: RequestContext): RequestContext {
  return { ...ctx, is_admin: true };
}

/** Ownership: owns both maps; borrows the conductor for reads. */
export class NovaObjectCache {
  private readonly instances = new Map<string, Primitive>();
  private readonly migrations = new Map<string, Primitive>();

  constructor(
    private readonly conductor: Conductor,
    private readonly log: Logger,
  ) {}

  keepInstance(uuid: string, inst: Primitive): void {
    this.instances.set(uuid, inst);
  }

  keepMigration(uuid: string, mig: Primitive): void {
    this.migrations.set(uuid, mig);
  }

  forgetInstance(uuid: string): void {
    this.instances.delete(uuid);
  }

  instance(uuid: string): Primitive | undefined {
    return this.instances.get(uuid);
  }

  migration(uuid: string): Primitive | undefined {
    return this.migrations.get(uuid);
  }

  /** A field of the latest Instance primitive (nested objects as primitives). */
  field(uuid: string, name: string): unknown {
    const inst = this.instances.get(uuid);
    return inst ? (inst['nova_object.data'] as Fields)[name] : undefined;
  }

  /** The uuid of the latest Migration kept for `instance`. */
  lastMigrationOf(instance: string): string | undefined {
    let found: string | undefined;
    for (const [uuid, m] of this.migrations) if ((m['nova_object.data'] as Fields).instance_uuid === instance) found = uuid;
    return found;
  }

  /** The kept Instance, else nova's (kept from then on); undefined when nova cannot say. */
  async instanceOrRead(ctx: RequestContext, uuid: string): Promise<Primitive | undefined> {
    const kept = this.instances.get(uuid);
    if (kept) return kept;
    const got = await this.conductor.classAction(elevated(ctx), 'Instance', 'get_by_uuid', [uuid], { expected_attrs: ['flavor', 'system_metadata'] }).catch((e: unknown) => {
      this.log.warn({ instance: uuid, reason: e instanceof Error ? e.message : String(e) }, 'cannot read the Instance from nova');
      return undefined;
    });
    if (!isPrimitive(got, 'Instance')) return undefined;
    this.instances.set(uuid, got);
    return got;
  }

  /** The kept Migration, else nova's (kept from then on); undefined when nova cannot say. */
  async migrationOrRead(ctx: RequestContext, uuid: string): Promise<Primitive | undefined> {
    const kept = this.migrations.get(uuid);
    if (kept) return kept;
    const got = await this.conductor.classAction(elevated(ctx), 'Migration', 'get_by_uuid', [uuid]).catch((e: unknown) => {
      this.log.warn({ migration: uuid, reason: e instanceof Error ? e.message : String(e) }, 'cannot read the Migration from nova');
      return undefined;
    });
    if (!isPrimitive(got, 'Migration')) return undefined;
    this.migrations.set(uuid, got);
    return got;
  }
}
