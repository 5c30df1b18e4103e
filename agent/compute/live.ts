/**
 * Live migration, as nova-compute runs it between two hosts:
 *
 *   dest   check_can_live_migrate_destination (call)  claim here; ONE POST /allocations swap;
 *                                                      driver check; calls the source's check
 *   source check_can_live_migrate_source (call)       driver check
 *   source live_migration (cast)                       calls pre_live_migration on the dest, runs the
 *                                                      driver, calls post_..._at_destination, empties
 *                                                      the migration consumer
 *   on failure: the source moves the allocations back in one POST and casts
 *               rollback_live_migration_at_destination; the instance stays ACTIVE on the source.
 */
import { POWER_STATE } from '../../virt-drivers/types';
import type { LiveMigrateData } from '../../virt-drivers/types';
import type { DecodedInstance, DecodedMigration } from './decode';
import { ComputeManager } from './manager';
import type { MigrationRecord } from '../../model/instance';
import type { RequestContext } from './ports';
import { arrivingRecord, claimMoveDestination } from './flow-steps';
import { migrationRef } from './resize';

const DEFAULT_CALL_MS = 120000;

export class LiveFlows {
  constructor(private readonly m: ComputeManager) {}

  private get callMs(): number {
    return this.m.deps.callTimeoutMs ?? DEFAULT_CALL_MS;
  }

  /** Destination: claim, swap, check, and ask the source; returns the migrate data. */
  checkDestination(inst: DecodedInstance, mig: DecodedMigration, ctx: RequestContext): Promise<LiveMigrateData> {
    const m = this.m;
    return m.locks.with(inst.uuid, async () => {
      const existing = m.record(inst.uuid);
      if (existing?.migration?.uuid === mig.uuid && existing.migration.migrate_data) return existing.migration.migrate_data;
      if (existing?.migration?.uuid === mig.uuid && existing.migration.role === 'dest') {
        // Interrupted by a restart before it answered: the caller gave up, so undo, never redo
        // (a redone check would hold swapped allocations for a live_migration that never comes).
        const held = await m.allocations.read(mig.uuid);
        if (held.consumer_generation !== undefined && Object.keys(held.allocations).length > 0) await m.allocations.revertMove(inst.uuid, mig.uuid);
        m.deps.tracker.claims.release(inst.uuid);
        await m.deps.driver.rollbackLiveMigrationAtDestination(existing, {}).catch(() => undefined);
        await m.forget(inst.uuid);
        throw new Error(`the live-migration check for ${inst.uuid} was interrupted by a restart and has been undone; ask again`);
      }
      if (existing) ComputeManager.expect(existing, 'live migrate to this host', false);
      const flavor = inst.flavor;
      if (!flavor) throw new Error('invalid argument instance: instance.flavor: missing');
      const rec = await m.save(
        arrivingRecord(m, inst, flavor, {
          vm_state: 'active',
          task_state: 'migrating',
          migration: { uuid: mig.uuid, type: 'live-migration', status: 'accepted', source_compute: mig.source_compute, dest_compute: m.deps.host, role: 'dest' },
        }),
      );
      const migration = rec.migration as MigrationRecord;
      let swapped = false;
      try {
        swapped = await claimMoveDestination(m, rec, migration, flavor, ctx);
        await m.save(rec);
        const source = { host: mig.source_compute, nodename: mig.source_compute };
        const destData = await m.deps.driver.checkCanLiveMigrateDestination(m.spec(rec), source);
        const data = await m.deps.peers.call<LiveMigrateData>(
          mig.source_compute,
          'check_can_live_migrate_source',
          { instance: m.controlPlane.instanceArg(rec), dest_check_data: destData },
          ctx,
          this.callMs,
        );
        migration.migrate_data = data;
        await m.save(rec);
        return data;
      } catch (e) {
        if (swapped) await m.allocations.revertMove(rec.uuid, mig.uuid).catch((err: unknown) => m.log.warn({ instance: rec.uuid, reason: (err as Error).message }, 'revert of the allocation swap failed; the audit will report it'));
        m.deps.tracker.claims.release(rec.uuid);
        await m.forget(rec.uuid);
        throw e;
      }
    });
  }

  /** Source: can this instance go? */
  checkSource(uuid: string, data: LiveMigrateData): Promise<LiveMigrateData> {
    const m = this.m;
    return m.locks.with(uuid, async () => {
      const rec = m.require(uuid);
      ComputeManager.expect(rec, 'live migrate', rec.vm_state === 'active' && !rec.task_state && !rec.migration);
      return m.deps.driver.checkCanLiveMigrateSource(rec, data);
    });
  }

  /** Source: run the migration end to end; on failure everything goes back. */
  liveMigration(uuid: string, mig: DecodedMigration, data: LiveMigrateData, ctx: RequestContext): Promise<void> {
    const m = this.m;
    return m.locks.with(uuid, async () => {
      const rec = m.record(uuid);
      if (!rec) return; // finished before (a redelivery after the record was dropped)
      if (rec.migration?.uuid !== mig.uuid) {
        ComputeManager.expect(rec, 'live migrate', rec.vm_state === 'active' && !rec.task_state && !rec.migration);
        rec.migration = {
          uuid: mig.uuid,
          type: 'live-migration',
          status: 'preparing',
          source_compute: m.deps.host,
          dest_compute: mig.dest_compute,
          role: 'source',
          source_allocations: rec.allocations,
          migrate_data: data,
        };
        rec.task_state = 'migrating';
        await m.save(rec);
        await m.notify(rec, 'live_migration_pre.start', ctx);
      }
      const migration = rec.migration as MigrationRecord;
      const dest = { host: migration.dest_compute, nodename: migration.dest_compute };
      if (migration.status === 'preparing' || migration.status === 'running') {
        try {
          const pre = await m.deps.peers.call<LiveMigrateData>(dest.host, 'pre_live_migration', { instance: m.controlPlane.instanceArg(rec), migrate_data: migration.migrate_data ?? data }, ctx, this.callMs);
          migration.status = 'running';
          migration.migrate_data = pre;
          await m.save(rec);
          await m.deps.driver.liveMigration(rec, dest, pre);
        } catch (e) {
          await this.rollback(rec, e, ctx);
          return;
        }
        migration.status = 'post-migrating';
        await m.save(rec);
      }
      await m.deps.driver.postLiveMigration(rec, migration.migrate_data ?? data).catch(() => undefined);
      await m.deps.peers.call(dest.host, 'post_live_migration_at_destination', { instance: m.controlPlane.instanceArg(rec), block_migration: false }, ctx, this.callMs);
      await m.allocations.dropMigration(migration.uuid, ctx.global_request_id ?? ctx.request_id);
      await m.forget(uuid);
      await m.notify({ ...rec, host: dest.host, task_state: null, migration: { ...migration, status: 'completed' } }, 'live_migration_post.end', ctx);
    });
  }

  private async rollback(rec: Parameters<ComputeManager['save']>[0], e: unknown, ctx: RequestContext): Promise<void> {
    const m = this.m;
    const migration = rec.migration as MigrationRecord;
    m.log.warn({ instance: rec.uuid, reason: (e as Error).message }, 'live migration failed; rolling back');
    await m.allocations.revertMove(rec.uuid, migration.uuid).catch((err: unknown) => m.log.warn({ instance: rec.uuid, reason: (err as Error).message }, 'revert of the allocation swap failed; the audit will report it'));
    await m.deps.peers
      .cast(migration.dest_compute, 'rollback_live_migration_at_destination', { instance: m.controlPlane.instanceArg(rec), destroy_disks: true, migrate_data: migration.migrate_data ?? {} }, ctx)
      .catch(() => undefined);
    rec.task_state = null;
    rec.allocations = migration.source_allocations ?? rec.allocations;
    delete rec.migration;
    await m.save(rec);
    await m.notify(rec, 'live_migration_abort.end', ctx, (e as Error).message);
  }

  /** Destination: start the incoming VM. */
  preLiveMigration(uuid: string, data: LiveMigrateData): Promise<LiveMigrateData> {
    const m = this.m;
    return m.locks.with(uuid, async () => {
      const rec = m.require(uuid);
      ComputeManager.expect(rec, 'prepare a live migration of', rec.migration?.role === 'dest');
      (rec.migration as MigrationRecord).status = 'preparing';
      await m.save(rec);
      return m.deps.driver.preLiveMigration(m.spec(rec), data);
    });
  }

  /** Destination: the instance runs here now. */
  postAtDestination(uuid: string, ctx: RequestContext): Promise<void> {
    const m = this.m;
    return m.locks.with(uuid, async () => {
      const rec = m.require(uuid);
      if (!rec.migration) return;
      await m.deps.driver.postLiveMigrationAtDestination(rec, rec.migration.migrate_data ?? {});
      rec.vm_state = 'active';
      rec.task_state = null;
      rec.power_state = POWER_STATE.RUNNING;
      delete rec.migration;
      await m.save(rec);
      await m.notify(rec, 'live_migration_post_dest.end', ctx);
    });
  }

  /** Destination: forget the aborted incoming instance and its claim. */
  rollbackAtDestination(uuid: string, data: LiveMigrateData): Promise<void> {
    const m = this.m;
    return m.locks.with(uuid, async () => {
      const rec = m.record(uuid);
      if (!rec || rec.migration?.role !== 'dest') return;
      await m.deps.driver.rollbackLiveMigrationAtDestination(rec, data).catch(() => undefined);
      m.deps.tracker.claims.release(uuid);
      await m.forget(uuid);
    });
  }
}

export { migrationRef };
