/**
 * `quiesce_instance` and `unquiesce_instance`, as nova-compute answers them around the snapshot of
 * a server booted from a volume: nova's API calls `quiesce_instance` (the guest's filesystems
 * frozen through its agent), asks Cinder for a snapshot of each volume, then casts
 * `unquiesce_instance` with those snapshots' mappings; this host waits until Cinder has taken each
 * one (its status no longer `creating`, polled every half second as nova does, for at most
 * `SNAPSHOT_WAIT_MS`), then thaws the guest.
 *
 * The quiesce answers with the exceptions nova's API expects: `QemuGuestAgentNotEnabled` (the API
 * snapshots unquiesced, unless the image sets os_require_quiesce) and `InstanceQuiesceFailed` (the
 * API answers 409). It is never journaled: a replay after a restart would freeze a guest nobody
 * thaws. The unquiesce is (its row): an agent restarted in the middle still thaws the guest. A
 * thaw that fails is logged, as nova logs it.
 */
import type { Clock } from '../../lib/clock';
import { NovaError } from '../rpc/oslo/errors';
import { GuestAgentNotEnabledError } from '../../virt-drivers/errors';
import type { CinderClients } from '../volume/factory';
import type { FlowContext } from './flow-context';
import type { RequestContext } from './ports';
import { errorText } from '../../lib/error-text';

export type QuiesceContext = Pick<FlowContext, 'locks' | 'require' | 'driver' | 'log'>;

/** One entry of `unquiesce_instance`'s `mapping` (a block device mapping nova's API made for the snapshot). */
export interface QuiesceMapping {
  readonly source_type?: string | null;
  readonly snapshot_id?: string | null;
}

/** How long the thaw waits for Cinder to take the snapshots (nova waits without a bound). */
export const SNAPSHOT_WAIT_MS = 10 * 60_000;
const POLL_MS = 500;

export class QuiesceFlows {
  constructor(
    private readonly c: QuiesceContext,
    private readonly o: { readonly cinder: CinderClients; readonly clock: Clock },
  ) {}

  /**
   * `quiesce_instance`: the guest's filesystems frozen.
   * @throws InstanceNotFoundError, NovaError `QemuGuestAgentNotEnabled` or `InstanceQuiesceFailed`
   */
  quiesce(uuid: string): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      try {
        await c.driver.quiesce(rec);
      } catch (e) {
        c.log.warn({ instance: uuid, reason: errorText(e) }, 'quiesce failed');
        if (e instanceof GuestAgentNotEnabledError) throw new NovaError('QemuGuestAgentNotEnabled', 'QEMU guest agent is not enabled', {}, 400, { cause: e });
        throw new NovaError('InstanceQuiesceFailed', `Failed to quiesce instance: ${errorText(e)}`, { reason: errorText(e) }, 409, { cause: e });
      }
      c.log.info({ instance: uuid }, 'quiesced for a volume snapshot');
    });
  }

  /** `unquiesce_instance`: once Cinder has taken the snapshots in `mapping`, the guest thawed. Never throws but InstanceNotFoundError. */
  async unquiesce(uuid: string, mapping: readonly QuiesceMapping[], ctx: RequestContext): Promise<void> {
    const c = this.c;
    c.require(uuid);
    await this.waitForSnapshots(uuid, mapping, ctx);
    await c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      await c.driver.unquiesce(rec).then(
        () => c.log.info({ instance: uuid }, 'unquiesced after its volume snapshots'),
        (e: unknown) => c.log.warn({ instance: uuid, reason: errorText(e) }, 'unquiesce failed'),
      );
    });
  }

  /** Polls each snapshot of `mapping` until Cinder no longer says `creating` (or it is gone, or the wait is over); failures are logged, never thrown. */
  private async waitForSnapshots(uuid: string, mapping: readonly QuiesceMapping[], ctx: RequestContext): Promise<void> {
    const ids = mapping.filter((m) => m.source_type === 'snapshot' && m.snapshot_id).map((m) => m.snapshot_id as string);
    if (ids.length === 0) return;
    const cinder = this.o.cinder.configured ? this.o.cinder.forRequest(ctx) : undefined;
    if (!cinder?.getSnapshot) {
      this.c.log.warn({ instance: uuid, snapshots: ids }, 'no Cinder to ask whether the volume snapshots are taken; thawing now');
      return;
    }
    const until = this.o.clock.now() + SNAPSHOT_WAIT_MS;
    for (const id of ids) {
      for (;;) {
        const status = await cinder.getSnapshot(id).then(
          (s) => s.status,
          (e: unknown) => {
            this.c.log.warn({ instance: uuid, snapshot: id, reason: errorText(e) }, 'cannot read a volume snapshot; not waiting for it');
            return 'unknown';
          },
        );
        if (status !== 'creating') break;
        if (this.o.clock.now() > until) {
          this.c.log.warn({ instance: uuid, snapshot: id }, `volume snapshot still creating after ${SNAPSHOT_WAIT_MS / 1000} s; thawing the guest anyway`);
          return;
        }
        await this.o.clock.sleep(POLL_MS);
      }
    }
  }
}
