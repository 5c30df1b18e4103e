/**
 * `set_admin_password`, as nova-compute answers it: a call, made after nova's API set
 * `updating_password`. The guest must be running; the driver sets the password of the image's
 * admin account through the guest's agent. Whatever happens, nova's task state is cleared and the
 * caller gets an answer nova's API turns into its own: no agent in the guest is
 * `InstanceAgentNotEnabled` (409), anything else `InstancePasswordSetFailed` (409) with nova's
 * words ("error setting admin password": the real reason goes to the log and the fault, never a
 * password).
 *
 * Not journaled (the method row): the password must not reach the disk, and a call's caller has
 * given up by the time a restarted agent could replay it.
 */
import { NovaError } from '../rpc/oslo/errors';
import { GuestAgentNotEnabledError } from '../../virt-drivers/errors';
import type { FlowContext } from './flow-context';
import type { RequestContext } from './ports';
import { check } from './transitions';
import { errorText } from '../../lib/error-text';

export type AdminPasswordContext = Pick<FlowContext, 'locks' | 'require' | 'driver' | 'log' | 'notify'>;

/** nova's `InstancePasswordSetFailed` (its words: "Failed to set admin password on <uuid> because <reason>"). */
function passwordSetFailed(uuid: string, why: string): NovaError {
  return new NovaError('InstancePasswordSetFailed', `Failed to set admin password on ${uuid} because ${why}`, { instance: uuid, reason: why }, 409);
}

/**
 * Sets the admin password of instance `uuid`'s guest.
 * @throws InstanceNotFoundError, InvalidStateError (a move under way), NovaError
 *   `InstanceAgentNotEnabled` or `InstancePasswordSetFailed`, each after nova's task is cleared
 */
export function setAdminPassword(c: AdminPasswordContext, uuid: string, password: string, ctx: RequestContext): Promise<void> {
  return c.locks.with(uuid, async () => {
    const rec = c.require(uuid);
    check(rec, 'set_admin_password.start');
    await c.notify(rec, 'set_admin_password.start', ctx);
    const power = await c.driver.getInfo(rec).then(
      (i) => i.powerState,
      () => undefined,
    );
    let refusal: NovaError | undefined;
    let fault = '';
    if (power !== 'RUNNING') {
      fault = `instance ${uuid} is not running`;
      refusal = passwordSetFailed(uuid, fault);
    } else {
      try {
        await c.driver.setAdminPassword(rec, password);
      } catch (e) {
        fault = errorText(e);
        refusal = e instanceof GuestAgentNotEnabledError ? new NovaError('InstanceAgentNotEnabled', 'Guest agent is not enabled for the instance', {}, 409, { cause: e }) : passwordSetFailed(uuid, 'error setting admin password');
      }
    }
    if (refusal) {
      c.log.warn({ instance: uuid, reason: fault }, 'set_admin_password failed');
      await c.notify(rec, 'set_admin_password.error', ctx, fault);
      throw refusal;
    }
    c.log.info({ instance: uuid }, 'admin password set');
    await c.notify(rec, 'set_admin_password.end', ctx);
  });
}
