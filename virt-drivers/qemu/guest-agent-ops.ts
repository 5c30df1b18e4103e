/**
 * What the driver asks of a guest's own agent (qemu-ga, through `guest-agent.ts`): a new password
 * for the admin account, as nova's libvirt driver sets it (`set_admin_password`), and the freeze
 * and thaw of its filesystems around a volume-backed server's snapshot (`quiesce`, `unquiesce`;
 * a local disk's snapshot freezes in `snapshot.ts`).
 *
 * A guest has an agent channel only when its image asked for one (`hw_qemu_guest_agent`, kept in
 * its definition); a guest without one is refused at once, as libvirt's driver refuses it, rather
 * than waited on. Calls on one instance are ordered by the instance table's lock (the channel
 * serves one client at a time).
 */
import { GuestAgentNotEnabledError } from '../errors';
import type { InstanceRef } from '../types';
import type { QemuHost } from './context';
import { freezeFilesystems, setUserPassword, thawFilesystems } from './guest-agent';
import { settledInstance } from './lifecycle';
import { runningVm } from './suspend';

/** nova's default admin account of a Linux guest (`os_admin_user` absent). */
const DEFAULT_ADMIN_USER = 'root';

/**
 * Sets the password of the guest's admin account (`os_admin_user`, else root) through its agent.
 * @throws InstanceNotFoundError, InstanceStateError (not running), GuestAgentNotEnabledError,
 *   GuestAgentUnavailableError (no answer within `[qemu] qmp_command_timeout`), GuestAgentCommandError
 */
export async function setAdminPassword(host: QemuHost, ref: InstanceRef, password: string): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'set the admin password of');
    await runningVm(host, m, 'set the admin password of', ['running']);
    const agent = m.rec.vm.guestAgent;
    if (!agent) throw new GuestAgentNotEnabledError(ref.uuid);
    const user = agent.adminUser ?? DEFAULT_ADMIN_USER;
    const t0 = host.clock.now();
    await setUserPassword(ref.uuid, m.paths.guestAgent, user, password, host.opts.qmpTimeoutMs);
    host.log.info({ instance: ref.uuid, user, ms: host.clock.now() - t0 }, 'admin password set through the guest agent');
  });
}

/**
 * Freezes (`frozen`) or thaws the guest's filesystems through its agent. A thaw of a guest that is
 * not running is a no-op (nothing is frozen in a guest that stopped).
 * @throws InstanceNotFoundError, InstanceStateError (a freeze of a guest not running), GuestAgentNotEnabledError, GuestAgentUnavailableError, GuestAgentCommandError
 */
export async function setFrozen(host: QemuHost, ref: InstanceRef, frozen: boolean): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const what = frozen ? 'quiesce' : 'unquiesce';
    const m = settledInstance(host, ref, what);
    if (!m.rec.vm.guestAgent) throw new GuestAgentNotEnabledError(ref.uuid);
    if (!frozen && !(m.vm && (await m.vm.alive()) && (await m.vm.runState()) === 'running')) return;
    if (frozen) await runningVm(host, m, what, ['running']);
    const n = await (frozen ? freezeFilesystems : thawFilesystems)(ref.uuid, m.paths.guestAgent, host.opts.qmpTimeoutMs);
    host.log.info({ instance: ref.uuid, filesystems: n }, frozen ? 'guest filesystems frozen' : 'guest filesystems thawed');
  });
}
