/**
 * `rescue_instance` and `unrescue_instance`, as nova-compute runs them: the guest restarted from a
 * rescue image (nova's `rescue_image_ref`, else the instance's own image) with its own disk
 * attached after the rescue disk, RESCUED; unrescued, it boots from its own disk again, ACTIVE.
 * A driver failure puts the instance in ERROR with the fault, as nova does
 * (`_error_out_instance_on_exception`). nova's `rescue_password` is not used: no guest agent is
 * spoken to, as with images that do not ask for one under libvirt.
 */
import { InvalidStateError, describeState } from '../../model/instance';
import type { FlowContext } from './flow-context';
import { driverStep } from './flow-steps';
import type { RequestContext } from './ports';

export type RescueContext = Pick<FlowContext, 'locks' | 'require' | 'save' | 'driver' | 'log' | 'notify'>;

export class RescueFlows {
  constructor(private readonly c: RescueContext) {}

  /** `rescue_instance`: booted from `imageRef` (absent: the instance's image), its disk second; RESCUED. */
  rescue(uuid: string, imageRef: string | null, cleanShutdown: boolean, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'rescue', ['rescue.start', 'rescue.end', 'rescue.error'], ctx, async (rec) => {
      const image = imageRef ?? rec.image_ref;
      if (!image) throw new InvalidStateError(uuid, 'rescue (it was booted from a volume and no rescue image was given)', describeState(rec));
      await this.c.driver.rescue(rec, image, cleanShutdown);
    });
  }

  /** `unrescue_instance`: booted from its own disk again; ACTIVE. */
  unrescue(uuid: string, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'unrescue', ['unrescue.start', 'unrescue.end', 'unrescue.error'], ctx, (rec) => this.c.driver.unrescue(rec));
  }
}
