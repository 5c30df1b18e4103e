/**
 * `live_migration_abort` and `live_migration_force_complete` (casts from nova's API to the source
 * host while its `live_migration` runs), as nova-compute serves them: abort asks the driver to
 * stop the migration, which then fails and is rolled back by the running flow (the guest stays
 * on the source, ACTIVE); force complete asks the driver to finish it now, at the price of a
 * longer pause of the guest (nova's libvirt driver pauses the guest so the copy converges).
 *
 * Neither takes the instance's lock: the live migration holds it until it ends. Each acts only on
 * an instance this host is the source of a running live migration for; anything else is refused
 * (InvalidStateError), as nova refuses a migration that is not running. nova's `migration_id` is
 * not read: a host runs one live migration of an instance at a time.
 */
import { describeState, InstanceNotFoundError, InvalidStateError, type InstanceRecord } from '../../model/instance';
import type { FlowContext } from './flow-context';

export class LiveMigrationControl {
  constructor(private readonly c: Pick<FlowContext, 'record' | 'driver' | 'log'>) {}

  /** @throws InstanceNotFoundError, InvalidStateError (no live migration from here running), what the driver threw */
  async abort(uuid: string): Promise<void> {
    const rec = this.running(uuid, 'abort the live migration of');
    await this.c.driver.liveMigrationAbort(rec);
    this.c.log.info({ instance: uuid, migration: rec.migration?.uuid }, 'live migration abort asked; the migration rolls back');
  }

  /** @throws InstanceNotFoundError, InvalidStateError, NotSupportedError, what the driver threw */
  async forceComplete(uuid: string): Promise<void> {
    const rec = this.running(uuid, 'force the live migration of');
    await this.c.driver.liveMigrationForceComplete(rec);
    this.c.log.info({ instance: uuid, migration: rec.migration?.uuid }, 'live migration forced to complete');
  }

  private running(uuid: string, operation: string): InstanceRecord {
    const rec = this.c.record(uuid);
    if (!rec) throw new InstanceNotFoundError(uuid);
    if (rec.task_state !== 'migrating' || rec.migration?.role !== 'source' || rec.migration.type !== 'live-migration') throw new InvalidStateError(uuid, operation, describeState(rec));
    return rec;
  }
}
