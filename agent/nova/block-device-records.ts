/**
 * nova's BlockDeviceMapping rows, written through nova-conductor as nova-compute writes them: a
 * `save` of only the fields a volume step changed (the attachment, the connection info, a volume
 * the host made), a `create` for `reserve_block_device_name` (its reply is the row nova-api
 * returns to the user), and a `destroy` after a detach.
 *
 * It is: the nova control plane's block-device steps, split out of `control-plane.ts`. It is not:
 * Cinder's side (`agent/volume/`) or the flows that decide what to write (`agent/compute/volume-*`).
 * Saves and destroys that fail are logged, never thrown (the control plane's rule); a create that
 * fails is thrown, since its caller has nothing to hand back without it.
 */
import type { Logger } from '../../lib/logging/logger';
import type { BlockDeviceChange } from '../compute/control-plane';
import type { RequestContext } from '../compute/ports';
import type { BlockDevice } from '../../model/block-device';
import { volumeArgs } from '../compute/decode-volume';
import { isInvalid } from '../rpc/endpoint/args';
import type { Conductor } from './conductor';
import { applyUpdates, primitive } from './objects';
import { elevated } from './object-cache';

export class NovaBlockDeviceRecords {
  constructor(
    private readonly conductor: Conductor,
    private readonly log: Logger,
  ) {}

  /** `BlockDeviceMapping.save` of `change` on row `bdmId`. */
  async save(uuid: string, bdmId: number, change: BlockDeviceChange, ctx: RequestContext): Promise<void> {
    // A primitive of the row's id and the changed fields: save() writes exactly `.changes`.
    const data = { id: bdmId, ...change };
    try {
      await this.conductor.objectAction(elevated(ctx), primitive('BlockDeviceMapping', data, this.conductor.objectVersions, Object.keys(change)), 'save');
    } catch (e) {
      this.log.warn({ instance: uuid, bdm: bdmId, fields: Object.keys(change), reason: e instanceof Error ? e.message : String(e) }, 'nova-conductor did not take the block device mapping; nova may show a stale volume');
    }
  }

  /** `BlockDeviceMapping.create`: the new row's id, and the row as nova returns it. @throws ConductorError */
  async create(uuid: string, fields: Readonly<Record<string, unknown>>, ctx: RequestContext): Promise<{ id: number | null; reply: unknown }> {
    const obj = primitive('BlockDeviceMapping', { instance_uuid: uuid, ...fields }, this.conductor.objectVersions);
    const { updates } = await this.conductor.objectAction(elevated(ctx), obj, 'create');
    const id = typeof updates.id === 'number' ? updates.id : null;
    return { id, reply: applyUpdates(obj, updates) };
  }

  /**
   * `BlockDeviceMappingList.get_by_instance_uuid`: the instance's rows, decoded as a build's are.
   * @throws ConductorError, Error naming the field of a row that cannot be read
   */
  async list(uuid: string, ctx: RequestContext): Promise<readonly BlockDevice[]> {
    const raw = await this.conductor.classAction(elevated(ctx), 'BlockDeviceMappingList', 'get_by_instance_uuid', [uuid]);
    const decoded = volumeArgs.blockDeviceMapping.decode(raw);
    if (isInvalid(decoded)) {
      const why = decoded.issues.map((i) => `${['block_device_mapping', ...i.path].join('.')}: ${i.problem}`).join('; ');
      throw new Error(`nova-conductor's block device mappings of instance ${uuid} cannot be read (${why})`);
    }
    return decoded ?? [];
  }

  /** `BlockDeviceMapping.destroy` of row `bdmId`. */
  async destroy(uuid: string, bdmId: number, ctx: RequestContext): Promise<void> {
    try {
      await this.conductor.objectAction(elevated(ctx), primitive('BlockDeviceMapping', { id: bdmId, instance_uuid: uuid }, this.conductor.objectVersions, []), 'destroy');
    } catch (e) {
      this.log.warn({ instance: uuid, bdm: bdmId, reason: e instanceof Error ? e.message : String(e) }, 'nova-conductor did not destroy the block device mapping; nova may still list the volume');
    }
  }
}
