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
import { MigrationPreCheckError } from '../../virt-drivers/errors';
import { movesWithPortsRefused } from '../network/errors';
import type { LiveMigrateData } from '../../virt-drivers/types';
import type { DecodedInstance, DecodedMigration } from './decode';
import type { InstanceRecord, MigrationRecord } from '../../model/instance';
import type { FlowContext } from './flow-context';
import { RpcTimeoutError } from '../rpc/oslo/errors';
import { crashPoint } from '../crash-points';
import { placementRequestId, type RequestContext } from './ports';
import { arrivingRecord, claimMoveDestination, instanceSpec, revertSwapOrLog } from './flow-steps';
import { arrival, check, failureOf, stateAfter, transition } from './transitions';

export type LiveContext = Pick<
  FlowContext,
  'host' | 'now' | 'locks' | 'claims' | 'driver' | 'peers' | 'controlPlane' | 'log' | 'callTimeoutMs' | 'record' | 'require' | 'save' | 'forget' | 'notify'
>;

export class LiveFlows {
  constructor(private readonly c: LiveContext) {}

  /** Destination: claim, swap, check, and ask the source; returns the migrate data. */
  checkDestination(inst: DecodedInstance, mig: DecodedMigration, ctx: RequestContext): Promise<LiveMigrateData> {
    const c = this.c;
    return c.locks.with(inst.uuid, async () => {
      const existing = c.record(inst.uuid);
      // Once pre_live_migration has run here the migration is under way: a repeated check answers as before.
      if (existing?.migration?.uuid === mig.uuid && existing.migration.migrate_data && existing.migration.status !== 'accepted') return existing.migration.migrate_data;
      if (existing?.migration?.uuid === mig.uuid && existing.migration.role === 'dest') {
        // Interrupted by a restart, before it answered or before its answer was journaled: the
        // caller gave up (or gets a refused pre_live_migration), so undo, never redo (a redone
        // check would hold swapped allocations for a live_migration that never comes).
        await c.claims.revertMove(inst.uuid, mig.uuid);
        c.claims.release(inst.uuid);
        await c.driver.rollbackLiveMigrationAtDestination(existing, {}).catch(() => undefined);
        await c.forget(inst.uuid);
        throw new Error(`the live-migration check for ${inst.uuid} was interrupted by a restart and has been undone; ask again`);
      }
      const state = arrival('live_migration_check.dest', existing);
      const flavor = inst.flavor;
      if (!flavor) throw new Error('invalid argument instance: instance.flavor: missing');
      const rec = await c.save(
        arrivingRecord(c, inst, flavor, {
          ...state,
          migration: { uuid: mig.uuid, type: 'live-migration', status: 'accepted', source_compute: mig.source_compute, dest_compute: c.host, role: 'dest' },
        }),
      );
      crashPoint('live.check.recorded');
      const migration = rec.migration as MigrationRecord;
      let swapped = false;
      try {
        swapped = await claimMoveDestination(c, rec, migration, flavor, ctx);
        await c.save(rec);
        crashPoint('live.check.claimed');
        await c.notify(rec, 'live_migration_check.dest', ctx);
        const source = { host: mig.source_compute, nodename: mig.source_compute };
        const destData = await c.driver.checkCanLiveMigrateDestination(instanceSpec(rec), source);
        const data = await c.peers.call<LiveMigrateData>(
          mig.source_compute,
          'check_can_live_migrate_source',
          { instance: c.controlPlane.instanceArg(rec), dest_check_data: destData },
          ctx,
          c.callTimeoutMs,
        );
        migration.migrate_data = data;
        await c.save(rec);
        crashPoint('live.check.answered');
        return data;
      } catch (e) {
        if (swapped) await revertSwapOrLog(c, rec.uuid, mig.uuid);
        c.claims.release(rec.uuid);
        await c.forget(rec.uuid);
        throw e;
      }
    });
  }

  /** Source: can this instance go? */
  checkSource(uuid: string, data: LiveMigrateData): Promise<LiveMigrateData> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      check(rec, 'live_migration_check.source');
      const ports = (rec.network_info ?? []).map((v) => v.id);
      if (ports.length) throw new MigrationPreCheckError(movesWithPortsRefused(uuid, ports, c.host));
      return c.driver.checkCanLiveMigrateSource(rec, data);
    });
  }

  /** Source: run the migration end to end; on failure everything goes back. */
  liveMigration(uuid: string, mig: DecodedMigration, data: LiveMigrateData, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (!rec) return; // finished before (a redelivery after the record was dropped)
      if (rec.migration?.uuid !== mig.uuid) {
        transition(rec, 'live_migration_pre.start');
        rec.migration = {
          uuid: mig.uuid,
          type: 'live-migration',
          status: 'preparing',
          source_compute: c.host,
          dest_compute: mig.dest_compute,
          role: 'source',
          source_allocations: rec.allocations,
          migrate_data: data,
        };
        await c.save(rec);
        crashPoint('live.source.recorded');
        await c.notify(rec, 'live_migration_pre.start', ctx);
      }
      const migration = rec.migration;
      const dest = { host: migration.dest_compute, nodename: migration.dest_compute };
      if (migration.status === 'preparing' || migration.status === 'running') {
        try {
          const pre = await c.peers.call<LiveMigrateData>(dest.host, 'pre_live_migration', { instance: c.controlPlane.instanceArg(rec), migrate_data: migration.migrate_data ?? data }, ctx, c.callTimeoutMs);
          migration.status = 'running';
          migration.migrate_data = pre;
          await c.save(rec);
          crashPoint('live.source.running');
          await c.driver.liveMigration(rec, dest, pre);
        } catch (e) {
          await this.rollback(rec, e, ctx);
          return;
        }
        migration.status = 'post-migrating';
        await c.save(rec);
        crashPoint('live.source.migrated');
      }
      await c.driver.postLiveMigration(rec, migration.migrate_data ?? data).catch(() => undefined);
      // The guest runs at the destination now, so nothing can go back: a destination that does not
      // answer (it died mid-call) finishes the request from its journal when it starts again. A
      // refusal it sent still fails the migration here.
      await c.peers
        .call(dest.host, 'post_live_migration_at_destination', { instance: c.controlPlane.instanceArg(rec), block_migration: false }, ctx, c.callTimeoutMs)
        .catch((e: unknown) => {
          if (!(e instanceof RpcTimeoutError)) throw e;
          c.log.warn({ instance: uuid, reason: e.message }, 'post_live_migration_at_destination did not answer; the destination finishes it from its journal');
        });
      crashPoint('live.source.posted');
      await c.claims.confirmMove(migration.uuid, placementRequestId(ctx));
      crashPoint('live.source.freed');
      await c.forget(uuid);
      await c.notify({ ...rec, ...stateAfter('live_migration_post.end', rec), host: dest.host, migration: { ...migration, status: 'completed' } }, 'live_migration_post.end', ctx);
    });
  }

  private async rollback(rec: InstanceRecord, e: unknown, ctx: RequestContext): Promise<void> {
    const c = this.c;
    const migration = rec.migration as MigrationRecord;
    c.log.warn({ instance: rec.uuid, reason: (e as Error).message }, 'live migration failed; rolling back');
    await revertSwapOrLog(c, rec.uuid, migration.uuid);
    await c.peers
      .cast(migration.dest_compute, 'rollback_live_migration_at_destination', { instance: c.controlPlane.instanceArg(rec), destroy_disks: true, migrate_data: migration.migrate_data ?? {} }, ctx)
      .catch(() => undefined);
    const step = failureOf('live_migration_pre.start');
    transition(rec, step);
    rec.allocations = migration.source_allocations ?? rec.allocations;
    delete rec.migration;
    await c.save(rec);
    await c.notify(rec, step, ctx, (e as Error).message);
  }

  /** Destination: start the incoming VM. */
  preLiveMigration(uuid: string, data: LiveMigrateData): Promise<LiveMigrateData> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      check(rec, 'live_migration_pre.dest');
      (rec.migration as MigrationRecord).status = 'preparing';
      await c.save(rec);
      crashPoint('live.dest.prepared');
      return c.driver.preLiveMigration(instanceSpec(rec), data);
    });
  }

  /** Destination: the instance runs here now. */
  postAtDestination(uuid: string, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      if (!rec.migration) return;
      check(rec, 'live_migration_post_dest.end');
      await c.driver.postLiveMigrationAtDestination(rec, rec.migration.migrate_data ?? {});
      crashPoint('live.dest.post');
      transition(rec, 'live_migration_post_dest.end');
      delete rec.migration;
      await c.save(rec);
      await c.notify(rec, 'live_migration_post_dest.end', ctx);
    });
  }

  /** Destination: forget the aborted incoming instance and its claim. */
  rollbackAtDestination(uuid: string, data: LiveMigrateData): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (!rec || rec.migration?.role !== 'dest') return;
      await c.driver.rollbackLiveMigrationAtDestination(rec, data).catch(() => undefined);
      c.claims.release(uuid);
      await c.forget(uuid);
    });
  }
}
