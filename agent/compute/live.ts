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
 *
 * Ports move with it through Neutron's port bindings (`agent/network/live-bindings.ts`): the
 * destination plugs its (inactive) binding's VIFs before QEMU starts there; once the guest runs
 * there the source activates that binding, unplugs its own VIFs and, last, deletes its binding.
 *
 * Volumes move with it through Cinder attachments (`volume-moves.ts`): the source names its
 * mappings in pre_live_migration (`bdms`); the destination makes an attachment with its own
 * connector for each and gives the incoming guest those connections; once the guest runs there
 * the source deletes its attachments and the destination completes its own and writes them into
 * nova's mappings; a rollback deletes the destination's. No volume is copied (both hosts open it).
 */
import { MigrationPreCheckError } from '../../virt-drivers/errors';
import { movesWithPortsRefused } from '../network/errors';
import { withNetworkInfo, type InstanceWithPorts } from './decode-network';
import type { NetworkFlows } from './network-flows';
import type { LiveMigrateData } from '../../virt-drivers/types';
import type { DecodedInstance, DecodedMigration } from './decode';
import type { InstanceRecord, MigrationRecord } from '../../model/instance';
import type { FlowContext } from './flow-context';
import { RpcTimeoutError } from '../rpc/oslo/errors';
import { crashPoint } from '../crash-points';
import { placementRequestId, type RequestContext } from './ports';
import { arrivingRecord, claimMoveDestination, instanceSpec, revertSwapOrLog } from './flow-steps';
import { arrival, check, failureOf, stateAfter, transition } from './transitions';
import type { BlockDevice } from '../../model/block-device';
import { VolumeMoves } from './volume-moves';

export type LiveContext = Pick<
  FlowContext,
  'host' | 'now' | 'locks' | 'claims' | 'driver' | 'peers' | 'controlPlane' | 'log' | 'callTimeoutMs' | 'record' | 'require' | 'save' | 'forget' | 'notify'
>;

/** The network steps a live migration takes (`NetworkFlows`). */
export type LiveNetworking = Pick<NetworkFlows, 'movesPorts' | 'liveArrive' | 'liveActivate' | 'liveSettle' | 'liveAbandon' | 'dropBindings'>;

/** The volume steps a live migration takes (`VolumeMoves`). */
export type LiveVolumes = Pick<VolumeMoves, 'liveArrive' | 'liveSettle' | 'liveAbandon' | 'liveLeave'>;

export class LiveFlows {
  constructor(
    private readonly c: LiveContext,
    private readonly net: LiveNetworking,
    private readonly volumes: LiveVolumes,
  ) {}

  /** Destination: claim, swap, check, and ask the source; returns the migrate data, in the control plane's form. */
  checkDestination(inst: DecodedInstance, mig: DecodedMigration, ctx: RequestContext): Promise<unknown> {
    const c = this.c;
    return c.locks.with(inst.uuid, async () => {
      const existing = c.record(inst.uuid);
      // Once pre_live_migration has run here the migration is under way: a repeated check answers as before.
      if (existing?.migration?.uuid === mig.uuid && existing.migration.migrate_data && existing.migration.status !== 'accepted') {
        return c.controlPlane.liveMigrateData(existing, existing.migration.migrate_data);
      }
      if (existing?.migration?.uuid === mig.uuid && existing.migration.role === 'dest') {
        // Interrupted by a restart, before it answered or before its answer was journaled: the
        // caller gave up (or gets a refused pre_live_migration), so undo, never redo (a redone
        // check would hold swapped allocations for a live_migration that never comes).
        await this.undoCheck(existing, mig.uuid);
        throw new Error(`the live-migration check for ${inst.uuid} was interrupted by a restart and has been undone; ask again`);
      }
      if (existing?.migration?.role === 'dest' && existing.migration.uuid !== mig.uuid && existing.migration.status === 'accepted') {
        // An earlier check answered here and its migration never came (nova's conductor gave up
        // after it, for instance when Neutron could not bind the ports here): undone, or the
        // instance could never come to this host again.
        c.log.warn({ instance: inst.uuid, migration: existing.migration.uuid }, 'an earlier live-migration check to this host was never followed by the migration; undoing it');
        await this.undoCheck(existing, existing.migration.uuid);
      }
      // A PAUSED server live-migrates paused (nova's API allows ACTIVE and PAUSED).
      const state = arrival('live_migration_check.dest', c.record(inst.uuid), inst.vm_state === 'paused' ? 'paused' : 'active');
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
        swapped = await claimMoveDestination(c, rec, migration, flavor, ctx, false, inst.image_ref === '');
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
        return c.controlPlane.liveMigrateData(rec, data);
      } catch (e) {
        if (swapped) await revertSwapOrLog(c, rec.uuid, mig.uuid);
        c.claims.release(rec.uuid);
        await c.forget(rec.uuid);
        throw e;
      }
    });
  }

  /** Destination: a check's claim, swap and record undone (the migration will not come). */
  private async undoCheck(rec: InstanceRecord, migrationUuid: string): Promise<void> {
    const c = this.c;
    await c.claims.revertMove(rec.uuid, migrationUuid);
    c.claims.release(rec.uuid);
    await c.driver.rollbackLiveMigrationAtDestination(rec, {}).catch(() => undefined);
    await c.forget(rec.uuid);
  }

  /** Source: can this instance go? */
  checkSource(uuid: string, data: LiveMigrateData): Promise<LiveMigrateData> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      check(rec, 'live_migration_check.source');
      const ports = (rec.network_info ?? []).map((v) => v.id);
      if (ports.length && !this.net.movesPorts) throw new MigrationPreCheckError(movesWithPortsRefused(uuid, ports, c.host));
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
          // The instance with its ports: the destination binds them and plugs what its binding says.
          const instance = withNetworkInfo(c.controlPlane.instanceArg(rec), rec.network_info ?? []);
          const args = { instance, migrate_data: migration.migrate_data ?? data, ...VolumeMoves.bdmsArg(rec) };
          const pre = await c.peers.call<LiveMigrateData>(dest.host, 'pre_live_migration', args, ctx, c.callTimeoutMs);
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
      // The guest runs at the destination: its ports are bound there from now on (nova's
      // migrate_instance_start), and this host's VIFs go with the source QEMU.
      await this.net.liveActivate(rec, dest.host).catch((e: unknown) =>
        c.log.error({ instance: uuid, host: dest.host, reason: (e as Error).message }, 'could not activate the ports\' bindings on the destination; the guest runs there, its ports may stay bound here until Neutron is fixed'),
      );
      await c.driver.postLiveMigration(rec, migration.migrate_data ?? data).catch(() => undefined);
      await this.volumes.liveLeave(rec, ctx);
      if (rec.network_info?.length) await c.driver.unplugVifs(rec, rec.network_info).catch((e: unknown) => c.log.warn({ instance: uuid, reason: (e as Error).message }, 'could not unplug the source VIFs'));
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
      await this.net.dropBindings(rec, c.host);
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
    // The destination takes its bindings back when the cast reaches it; a destination that never
    // got as far as pre_live_migration (or is gone) leaves them to the source.
    await this.net.liveAbandon(rec.uuid, (rec.network_info ?? []).map((v) => v.id), migration.dest_compute);
    const step = failureOf('live_migration_pre.start');
    transition(rec, step);
    rec.allocations = migration.source_allocations ?? rec.allocations;
    delete rec.migration;
    await c.save(rec);
    await c.notify(rec, step, ctx, (e as Error).message);
  }

  /**
   * Destination: bind the instance's ports here, attach its volumes (`bdms`, the source's
   * mappings) with this host's connector, and start the incoming VM with their VIFs and
   * connections. The data this host answered the check with comes first: a control plane in
   * between (nova's conductor) passes on only the fields its own object has.
   */
  preLiveMigration(instance: InstanceWithPorts, data: LiveMigrateData, ctx: RequestContext = {}, bdms: readonly BlockDevice[] | null = null): Promise<LiveMigrateData> {
    const c = this.c;
    const uuid = instance.uuid;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      check(rec, 'live_migration_pre.dest');
      const migration = rec.migration as MigrationRecord;
      migration.status = 'preparing';
      await c.save(rec);
      crashPoint('live.dest.prepared');
      await this.net.liveArrive(rec, instance.port_ids, instance.preserved_port_ids);
      try {
        await this.volumes.liveArrive(rec, bdms, ctx);
        return await c.driver.preLiveMigration({ ...instanceSpec(rec), network_info: rec.network_info ?? [] }, { ...data, ...migration.migrate_data });
      } catch (e) {
        await this.net.liveAbandon(uuid, instance.port_ids, c.host);
        await this.volumes.liveAbandon(rec, ctx);
        rec.network_info = [];
        await c.save(rec);
        throw e;
      }
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
      // A guest that left paused stays paused here, whatever the driver's twin did on arrival.
      if (rec.vm_state === 'paused') await c.driver.pause(rec);
      crashPoint('live.dest.post');
      await this.net.liveSettle(rec, ctx).catch((e: unknown) =>
        c.log.warn({ instance: uuid, reason: (e as Error).message }, "could not take migrating_to out of the ports' profiles or re-read them"),
      );
      await this.volumes.liveSettle(rec, ctx);
      transition(rec, 'live_migration_post_dest.end');
      delete rec.migration;
      await c.save(rec);
      await c.notify(rec, 'live_migration_post_dest.end', ctx);
    });
  }

  /** Destination: forget the aborted incoming instance, the attachments it made and its claim. */
  rollbackAtDestination(uuid: string, data: LiveMigrateData, ctx: RequestContext = {}): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (!rec || rec.migration?.role !== 'dest') return;
      await this.net.liveAbandon(uuid, (rec.network_info ?? []).map((v) => v.id), c.host);
      await c.driver.rollbackLiveMigrationAtDestination(rec, data).catch(() => undefined);
      await this.volumes.liveAbandon(rec, ctx);
      c.claims.release(uuid);
      await c.forget(uuid);
    });
  }
}
