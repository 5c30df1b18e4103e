/**
 * Rescue and unrescue of QEMU instances, as nova's libvirt driver does them: the guest is stopped
 * (cleanly within `shutdown_timeout` when asked) and started again from the rescue image (a fresh
 * overlay, `disk.rescue`, the guest's first disk and the one it boots), with its own root disk
 * attached after it, untouched, for the rescue system to repair. Unrescue stops it, drops the
 * rescue overlay and boots the instance from its own disk again. While rescued, power operations
 * keep the rescue layout (the definition says so), as a rescued libvirt domain does.
 *
 * Not here: the rescue image's choice (the compute manager: `rescue_image_ref`, else the
 * instance's own image), volume-backed instances (they have no root disk here: refused).
 */
import { rm } from 'node:fs/promises';
import { NotSupportedError } from '../errors';
import type { InstanceRef } from '../types';
import type { QemuHost } from './context';
import { settledInstance } from './lifecycle';

/** Starts the instance from `imageRef`'s rescue disk with its own disk second; rescued already is fine. @throws InstanceNotFoundError, InstanceStateError, NotSupportedError, ImageError, VmStartError */
export async function rescue(host: QemuHost, ref: InstanceRef, imageRef: string, cleanShutdown: boolean): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'rescue');
    if (m.rec.vm.rescue) return;
    if (!m.rec.vm.disk) throw new NotSupportedError('qemu', 'the rescue of an instance without a local root disk (booted from a volume)');
    const image = await host.images.resolve(imageRef);
    await host.table.stop(m, cleanShutdown ? host.opts.shutdownTimeoutMs : 0);
    await rm(m.paths.rescueDisk, { force: true });
    await host.images.createOverlay(m.paths.rescueDisk, image, m.rec.flavor.root_gb);
    await host.table.save(m, { vm: { ...m.rec.vm, rescue: true } });
    try {
      await host.table.start(m);
    } catch (e) {
      // Not left half-rescued: the definition goes back to the instance's own disk (still stopped).
      await host.table.save(m, { vm: { ...m.rec.vm, rescue: false } });
      await rm(m.paths.rescueDisk, { force: true });
      throw e;
    }
    await host.table.save(m, { power: 'running' });
    host.log.info({ instance: ref.uuid, image: imageRef }, 'instance rescued');
  });
}

/** Boots the instance from its own disk again, the rescue disk dropped; not rescued is fine. @throws InstanceNotFoundError, InstanceStateError, VmStartError */
export async function unrescue(host: QemuHost, ref: InstanceRef): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'unrescue');
    if (!m.rec.vm.rescue) return;
    await host.table.stop(m, 0);
    await host.table.save(m, { vm: { ...m.rec.vm, rescue: false } });
    await rm(m.paths.rescueDisk, { force: true });
    await host.table.start(m);
    await host.table.save(m, { power: 'running' });
    host.log.info({ instance: ref.uuid }, 'instance unrescued');
  });
}
