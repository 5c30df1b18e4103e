/**
 * Cold migration and resize, as nova-compute runs them between two hosts, each step resumable
 * from what the journal recorded:
 *
 *   dest   prep_resize          claim here; ONE POST /allocations: migration <- source, instance <- dest
 *   source resize_instance      migrate_disk_and_power_off; cast finish_resize
 *   dest   finish_resize        finish_migration; instance RESIZED here
 *   source confirm_resize       confirm_migration; migration consumer emptied (with its generation)
 *   dest   revert_resize        destroy the dest copy; cast finish_revert_resize
 *   source finish_revert_resize ONE POST /allocations: instance <- migration's; finish_revert_migration
 *
 * Ports move with the instance as in nova: the source unplugs them with the power off and names
 * them in finish_resize's instance (its info cache); the destination binds them to itself before
 * it starts the guest; confirm deletes the source's binding (gone already after the PUT, so a 404);
 * a revert binds them back to the source, which starts the guest and waits for its ports' events.
 * Volumes too (`volume-moves.ts`): the host giving the instance up replaces each attachment by a
 * connector-less one and sends the mappings (`bdms`); the host taking it connects them first.
 *
 * Without nova's database the two hosts tell each other the outcome of confirm
 * (`confirm_resize_at_destination`) and of a failed source step (`drop_move_claim_at_destination`).
 * In nova mode the conductor has already swapped the allocations; prep_resize then verifies.
 */
import type { MigrationRef } from '../../virt-drivers/types';
import type { DecodedInstance, DecodedMigration } from './decode';
import type { Flavor, InstanceRecord, MigrationRecord } from '../../model/instance';
import type { FlowContext } from './flow-context';
import { crashPoint } from '../crash-points';
import { placementRequestId, type RequestContext } from './ports';
import { arrivingRecord, claimMoveDestination, instanceSpec, putInError, revertSwapOrLog } from './flow-steps';
import { plainMigrationArg } from './control-plane';
import { arrival, check, failureOf, reached, transition } from './transitions';
import type { NetworkFlows } from './network-flows';
import { withNetworkInfo, type InstanceWithPorts } from './decode-network';
import type { BlockDevice } from '../../model/block-device';
import { VolumeMoves } from './volume-moves';

/** The agent-only namespace for messages nova has no equivalent of (its database does the job). */
export const AGENT_NAMESPACE = 'compute_agent';

export function migrationRef(m: Pick<MigrationRecord, 'uuid' | 'source_compute' | 'dest_compute'>): MigrationRef {
  return { uuid: m.uuid, source: { host: m.source_compute, nodename: m.source_compute }, dest: { host: m.dest_compute, nodename: m.dest_compute } };
}

export type ResizeContext = Pick<FlowContext, 'host' | 'now' | 'locks' | 'claims' | 'driver' | 'peers' | 'controlPlane' | 'log' | 'record' | 'require' | 'save' | 'forget' | 'notify'>;

export class ResizeFlows {
  constructor(
    private readonly c: ResizeContext,
    private readonly networking: Pick<NetworkFlows, 'moveHere' | 'dropBindings' | 'startAndWait'>,
    private readonly volumes: Pick<VolumeMoves, 'disconnect' | 'undoDisconnect' | 'connect'>,
  ) {}

  /** Destination: claim and swap the allocations, then ask the source to move the disk. */
  prepResize(inst: DecodedInstance, flavor: Flavor, mig: DecodedMigration, ctx: RequestContext, oldVmState: string | undefined): Promise<void> {
    const c = this.c;
    return c.locks.with(inst.uuid, async () => {
      let rec = c.record(inst.uuid);
      const resuming = rec !== undefined;
      if (rec?.migration?.uuid !== mig.uuid) {
        const oldVm = oldVmState === 'stopped' ? 'stopped' : 'active';
        const state = arrival('resize_prep.start', rec, oldVm);
        if (mig.source_compute === c.host) throw new Error('resize to the same host is not supported; choose another destination');
        rec = await c.save(
          arrivingRecord(c, inst, flavor, {
            ...state,
            migration: {
              uuid: mig.uuid,
              type: mig.migration_type === 'resize' ? 'resize' : 'migration',
              status: 'pre-migrating',
              source_compute: mig.source_compute,
              dest_compute: c.host,
              role: 'dest',
              ...(inst.flavor ? { old_flavor: inst.flavor } : {}),
              new_flavor: flavor,
              old_vm_state: oldVm,
            },
          }),
        );
        crashPoint('resize.prep.recorded');
        await c.notify(rec, 'resize_prep.start', ctx);
      }
      const migration = rec.migration as MigrationRecord;
      if (!migration.dest_allocations) {
        try {
          await claimMoveDestination(c, rec, migration, flavor, ctx, resuming, inst.image_ref === '');
          await c.save(transition(rec, 'resize_prep.end'));
          crashPoint('resize.prep.claimed');
          await c.notify(rec, 'resize_prep.end', ctx);
        } catch (e) {
          c.claims.release(rec.uuid);
          await c.forget(rec.uuid);
          await c.notify(rec, failureOf('resize_prep.end'), ctx, (e as Error).message);
          throw e;
        }
      }
      await c.peers.cast(migration.source_compute, 'resize_instance', {
        instance: c.controlPlane.instanceArg(rec, migration.old_flavor ?? flavor),
        migration: c.controlPlane.migrationArg(migration),
        flavor,
        clean_shutdown: true,
      }, ctx);
      crashPoint('resize.prep.cast');
    });
  }

  /** Source: power off and hand the disk over; the migration consumer now holds our allocations. */
  resizeInstance(uuid: string, mig: DecodedMigration, flavor: Flavor, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      if (rec.migration?.uuid !== mig.uuid) {
        transition(rec, 'resize.start');
        const type = mig.migration_type === 'resize' ? 'resize' : 'migration';
        const before = { old_vm_state: rec.vm_state, old_flavor: rec.flavor, new_flavor: flavor, source_allocations: rec.allocations };
        rec.migration = { uuid: mig.uuid, type, status: 'migrating', source_compute: c.host, dest_compute: mig.dest_compute, role: 'source', ...before };
        await c.save(rec);
        crashPoint('resize.source.recorded');
        await c.notify(rec, 'resize.start', ctx);
      }
      const migration = rec.migration;
      if (migration.status === 'migrating') {
        try {
          const disk = await c.driver.migrateDiskAndPowerOff(rec, migrationRef(migration), flavor);
          migration.disk_info = disk.diskInfo;
          crashPoint('resize.source.moved');
          await this.volumes.disconnect(rec, ctx);
        } catch (e) {
          await this.volumes.undoDisconnect(rec, ctx);
          await this.failAtSource(rec, e, ctx);
          return;
        }
        migration.status = 'post-migrating';
        await c.save(transition(rec, 'resize.end'));
        await c.notify(rec, 'resize.end', ctx);
      }
      await c.peers.cast(migration.dest_compute, 'finish_resize', {
        instance: withNetworkInfo(c.controlPlane.instanceArg(rec, flavor), rec.network_info ?? []),
        migration: c.controlPlane.migrationArg(migration),
        disk_info: migration.disk_info ?? '',
        ...VolumeMoves.bdmsArg(rec),
      }, ctx);
      crashPoint('resize.source.cast');
    });
  }

  private async failAtSource(rec: InstanceRecord, e: unknown, ctx: RequestContext): Promise<void> {
    const c = this.c;
    const migration = rec.migration as MigrationRecord;
    await revertSwapOrLog(c, rec.uuid, migration.uuid);
    const step = failureOf('resize.end');
    transition(rec, step);
    delete rec.migration;
    await c.save(rec);
    // The record drops the migration; the control plane still hears which one failed (nova: its status error).
    await c.notify({ ...rec, migration: { ...migration, status: 'error' } }, step, ctx, (e as Error).message);
    await c.peers.cast(migration.dest_compute, 'drop_move_claim_at_destination', { instance: c.controlPlane.instanceArg(rec), migration: c.controlPlane.migrationArg(migration) }, ctx);
  }

  /** Destination: bind its ports, connect the volumes (`bdms`, from the source) here, start the moved instance; it is RESIZED here until confirmed or reverted. */
  finishResize(instance: InstanceWithPorts, mig: DecodedMigration, diskInfo: string, ctx: RequestContext, bdms: readonly BlockDevice[] | null = null): Promise<void> {
    const c = this.c;
    const uuid = instance.uuid;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      if (reached(rec, 'resize_finish.end', mig.uuid)) return; // finished before (a redelivery)
      await c.save(transition(rec, 'resize_finish.start', mig.uuid));
      const migration = rec.migration as MigrationRecord;
      crashPoint('resize.finish.recorded');
      await c.notify(rec, 'resize_finish.start', ctx);
      try {
        await this.networking.moveHere(rec, instance.port_ids, ctx, instance.preserved_port_ids);
      } catch (e) {
        await putInError(c, rec, `finish_migration failed: the ports could not be bound to ${c.host}: ${(e as Error).message}`, ctx, failureOf('resize_finish.end'));
        return;
      }
      try {
        await this.volumes.connect(rec, ctx, bdms);
        const spec = { ...instanceSpec(rec), network_info: rec.network_info ?? [] };
        await c.driver.finishMigration(spec, migrationRef(migration), { diskInfo }, { powerOn: migration.old_vm_state !== 'stopped' });
      } catch (e) {
        await putInError(c, rec, `finish_migration failed: ${(e as Error).message}`, ctx, failureOf('resize_finish.end'));
        return;
      }
      crashPoint('resize.finish.spawned');
      migration.status = 'finished';
      await c.save(transition(rec, 'resize_finish.end'));
      await c.notify(rec, 'resize_finish.end', ctx);
    });
  }

  /** Source: the move is kept; the source copy and the migration's allocations go. */
  confirmResize(uuid: string, mig: DecodedMigration, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (rec) {
        check(rec, 'resize_confirm.end', mig.uuid);
        const migration = rec.migration as MigrationRecord;
        migration.status = 'confirming';
        await c.save(rec);
        crashPoint('confirm.recorded');
        await c.driver.confirmMigration(rec, migrationRef(migration));
        await this.networking.dropBindings(rec, c.host);
        crashPoint('confirm.driver');
        await c.claims.confirmMove(migration.uuid, placementRequestId(ctx));
        crashPoint('confirm.freed');
        await c.forget(uuid);
        await c.notify({ ...rec, migration: { ...migration, status: 'confirmed' } }, 'resize_confirm.end', ctx);
      } else {
        // Already confirmed here (a redelivery): make sure the migration holds nothing.
        await c.claims.confirmMove(mig.uuid);
      }
      crashPoint('confirm.before-cast');
      await c.peers.cast(mig.dest_compute, 'confirm_resize_at_destination', { instance: { uuid }, migration: plainMigrationArg(mig) }, ctx, AGENT_NAMESPACE);
    });
  }

  /** Destination, after confirm: the instance is simply ours now. */
  confirmAtDestination(uuid: string, migUuid: string): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (!rec || rec.migration?.uuid !== migUuid) return;
      transition(rec, 'resize_confirm.dest');
      delete rec.migration;
      await c.save(rec);
      crashPoint('confirm.dest');
    });
  }

  /** Destination: undo our half, then let the source take the instance back. */
  revertResize(uuid: string, mig: DecodedMigration, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (rec) {
        transition(rec, 'resize_revert.start', mig.uuid);
        const migration = rec.migration as MigrationRecord;
        migration.status = 'reverting';
        await c.save(rec);
        crashPoint('revert.dest.recorded');
        await c.notify(rec, 'resize_revert.start', ctx);
        await c.driver.destroy(rec).catch(() => undefined);
        // Logged, not fatal, as the ports' move back: the source still connects what it is sent.
        await this.volumes.disconnect(rec, ctx).catch((e: unknown) => c.log.error({ instance: uuid, reason: (e as Error).message }, 'could not hand the volumes back on revert'));
        c.claims.release(uuid);
        await c.forget(uuid);
        migration.status = 'reverted';
        await c.notify(transition(rec, 'resize_revert.dest'), 'resize_revert.dest', ctx);
      }
      crashPoint('revert.dest.before-cast');
      await c.peers.cast(mig.source_compute, 'finish_revert_resize', { instance: c.controlPlane.instanceRef(uuid), migration: c.controlPlane.migrationArg(mig), ...VolumeMoves.bdmsArg(rec) }, ctx);
    });
  }

  /** Source: the allocations come back in one write, the volumes (`bdms`, from the destination) connect here again and the original instance starts. */
  finishRevertResize(uuid: string, mig: DecodedMigration, ctx: RequestContext, bdms: readonly BlockDevice[] | null = null): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      check(rec, 'resize_revert.end', mig.uuid);
      const migration = rec.migration as MigrationRecord;
      migration.status = 'reverted';
      await c.save(rec);
      crashPoint('revert.source.recorded');
      await c.claims.revertMove(uuid, migration.uuid, placementRequestId(ctx));
      crashPoint('revert.source.swapped');
      // The ports and volumes come back before the guest starts; a Neutron or Cinder failure here
      // is logged and the revert goes on (the guest is back on its own disk either way, its ports'
      // binding or attachments repaired by an operator), so that the instance never stays in a task state.
      await this.networking.moveHere(rec, (rec.network_info ?? []).map((v) => v.id), ctx).catch((e: unknown) =>
        c.log.error({ instance: uuid, err: e instanceof Error ? e.message : String(e) }, 'could not bind the ports back to this host on revert'),
      );
      await this.volumes.connect(rec, ctx, bdms).catch((e: unknown) => c.log.error({ instance: uuid, err: (e as Error).message }, 'could not connect the volumes back to this host on revert'));
      await this.networking.startAndWait(rec, () => c.driver.finishRevertMigration(rec, migrationRef(migration), { powerOn: migration.old_vm_state !== 'stopped' }));
      crashPoint('revert.source.spawned');
      transition(rec, 'resize_revert.end');
      rec.flavor = migration.old_flavor ?? rec.flavor;
      rec.allocations = migration.source_allocations ?? rec.allocations;
      delete rec.migration;
      await c.save(rec);
      await c.notify(rec, 'resize_revert.end', ctx);
    });
  }

  /** Destination, after a failure at the source: drop our claim and our record. */
  dropMoveClaim(uuid: string): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (!rec || rec.migration?.role !== 'dest') return;
      await c.driver.rollbackLiveMigrationAtDestination(rec, {}).catch(() => undefined);
      c.claims.release(uuid);
      await c.forget(uuid);
    });
  }
}
