/**
 * Asking a running guest to let go of a hot-plugged device (a NIC or a volume's disk), as nova's
 * libvirt driver does: `device_del`, then up to `timeoutMs` for QEMU's `DEVICE_DELETED`, repeated
 * up to `attempts` times (nova's `[libvirt] device_detach_attempts` and `device_detach_timeout`).
 * A guest that is still booting, or just rebooted, misses the first press of the PCIe slot's
 * attention button; the request is sent again, as libvirt's caller does.
 *
 * QEMU refuses a repeated request within its own window after the first ("already in the process
 * of unplug"); that attempt just waits on. A device QEMU no longer has counts as released (an
 * earlier request the guest answered late). It is not: what is removed after the release (nodes,
 * netdevs, secrets), nor the definition on disk; the callers do those.
 */
import { QmpCommandError, QmpTimeoutError } from './errors';
import type { DetachPolicy } from './options';
import type { QemuVm } from './vm';

export type { DetachPolicy };

/** The guest kept the device through every request. */
export class DeviceNotReleasedError extends QmpTimeoutError {
  constructor(
    readonly device: string,
    readonly policy: DetachPolicy,
  ) {
    super(`device_del ${device} (${policy.attempts} requests, ${policy.timeoutMs} ms each)`, policy.attempts * policy.timeoutMs);
    this.name = 'DeviceNotReleasedError';
  }
}

const IN_PROGRESS = /already in the process of unplug/i;

/**
 * Resolves once the guest has released `device` (or QEMU has no such device).
 * @throws DeviceNotReleasedError after the last request; QmpCommandError when QEMU refuses the
 * request (other than "in progress" or "not found"); what the QMP connection threw
 */
export async function releaseDevice(vm: QemuVm, device: string, policy: DetachPolicy, onRetry?: (attempt: number) => void): Promise<void> {
  const attempts = Math.max(1, policy.attempts);
  for (let attempt = 1; attempt <= attempts; attempt++) {
    if (attempt > 1) onRetry?.(attempt);
    // Armed before device_del: the event can come in the same read as the command's answer.
    const deleted = (await vm.qmp()).waitEvent('DEVICE_DELETED', { timeoutMs: policy.timeoutMs, match: (e) => e.data.device === device });
    deleted.catch(() => undefined);
    try {
      await vm.execute('device_del', { id: device });
    } catch (e) {
      if (e instanceof QmpCommandError && e.errorClass === 'DeviceNotFound') return;
      if (!(e instanceof QmpCommandError && IN_PROGRESS.test(e.desc))) throw e;
    }
    try {
      await deleted;
      return;
    } catch (e) {
      if (!(e instanceof QmpTimeoutError)) throw e;
    }
  }
  throw new DeviceNotReleasedError(device, { attempts, timeoutMs: policy.timeoutMs });
}
