/**
 * nova's records of an instance's network, written through nova-conductor as nova-compute writes
 * them (nova `network/neutron.py`, `compute/manager.py`): a `VirtualInterface` per port bound to
 * the instance (`address` = `<mac>/<port id>`, `uuid` = the port), the `InstanceInfoCache` whose
 * `network_info` nova-api reads the server's addresses from, on a detach the port's row destroyed
 * (`VirtualInterface.get_by_uuid`, then `destroy`, as `deallocate_port_for_instance` does), and on
 * release `VirtualInterface.delete_by_instance_uuid` with an empty cache.
 *
 * It is: the nova control plane's `network` step, split out of `control-plane.ts`. It is not: the
 * Neutron side (`agent/network/`). Failures are logged, never thrown (the control plane's rule).
 */
import type { Logger } from '../../lib/logging/logger';
import type { NetworkChange } from '../compute/control-plane';
import type { RequestContext } from '../compute/ports';
import type { NetworkInfo } from '../../model/network';
import type { Conductor } from './conductor';
import { isPrimitive, primitive } from './objects';
import { elevated } from './object-cache';

export class NovaNetworkRecords {
  constructor(
    private readonly conductor: Conductor,
    private readonly log: Logger,
  ) {}

  async write(uuid: string, change: NetworkChange, ctx: RequestContext): Promise<void> {
    const c = elevated(ctx);
    try {
      if (change.kind === 'allocated') {
        // network_id is nova-network's integer id: not nullable, and nova-compute leaves it unset
        // with Neutron (the conductor refuses None: "Field `network_id' cannot be None").
        for (const vif of change.added) {
          const data = { address: `${vif.address}/${vif.id}`, instance_uuid: uuid, uuid: vif.id, tag: null };
          await this.conductor.objectAction(c, primitive('VirtualInterface', data, this.conductor.objectVersions), 'create');
        }
      }
      if (change.kind === 'detached') await this.destroyRow(c, uuid, change.removed.id);
      if (change.kind === 'released') await this.conductor.classAction(c, 'VirtualInterface', 'delete_by_instance_uuid', [uuid]);
      await this.saveCache(c, uuid, change.kind === 'released' ? [] : change.info);
    } catch (e) {
      this.log.warn({ instance: uuid, change: change.kind, reason: e instanceof Error ? e.message : String(e) }, "nova-conductor did not take the instance's network records; nova may show stale addresses");
    }
  }

  /** The port's VirtualInterface destroyed; a port nova has no row for is logged, as nova does. */
  private async destroyRow(ctx: RequestContext, uuid: string, portId: string): Promise<void> {
    const row = await this.conductor.classAction(ctx, 'VirtualInterface', 'get_by_uuid', [portId]);
    if (isPrimitive(row, 'VirtualInterface')) await this.conductor.objectAction(ctx, row, 'destroy');
    else this.log.info({ instance: uuid, port: portId }, 'nova has no VirtualInterface for the detached port');
  }

  /** `InstanceInfoCache.save` with the VIFs as nova's NetworkModel field carries them (a JSON string). */
  private async saveCache(ctx: RequestContext, uuid: string, info: NetworkInfo): Promise<void> {
    const cache = primitive('InstanceInfoCache', { instance_uuid: uuid, network_info: JSON.stringify(info) }, this.conductor.objectVersions, ['network_info']);
    await this.conductor.objectAction(ctx, cache, 'save');
  }
}
