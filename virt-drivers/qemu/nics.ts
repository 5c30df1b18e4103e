/**
 * The qemu driver's NICs: plugging an instance's VIFs around its QEMU processes, and hot-plugging
 * interfaces into a running guest.
 *
 * The record keeps two views of the NICs: `vifs` (nova's VIF JSON, what the plugger needs to plug
 * them again after a host reboot or on a move's destination) and `vm.nics` (the guest's devices:
 * port, MAC, tap, MTU, slot; it travels with a live migration so the destination starts the same
 * devices). Every QEMU start plugs the recorded VIFs first (`InstanceTable.beforeStart`):
 * plugging is idempotent, so this only creates what is missing.
 *
 * Hot plug (QMP): `netdev_add` (the tap) then `device_add` (virtio-net into the NIC's slot).
 * Hot unplug: `device_del`, then the guest must release the device (ACPI or PCIe hot-plug in the
 * guest OS); QEMU reports it with `DEVICE_DELETED`, after which `netdev_del` frees the tap. A
 * guest that never releases it (no OS support, hung) through every request (`device-release.ts`)
 * fails the detach, leaving the NIC attached and recorded, as nova's libvirt driver does.
 *
 * It is: functions over `QemuHost` the driver maps `plugVifs`, `unplugVifs`, `attachInterface`
 * and `detachInterface` onto. It is not: the plugging itself (`../net/`).
 */
import type { NetworkInfo, Vif } from '../../model/network';
import { DriverError } from '../errors';
import type { InstanceRef } from '../types';
import { NIC_SLOTS, nicDevice, nicDeviceId, netdevId, nicNetdev } from './cmdline';
import { checkSpec, nicDefinitions, plugAll, type QemuHost } from './context';
import { DeviceNotReleasedError, releaseDevice, type DetachPolicy } from './device-release';
import { QmpCommandError } from './errors';
import type { NicDefinition } from './instance-files';
import type { Managed } from './instances';
import { settledInstance } from './lifecycle';

/** Replaces the recorded VIFs of the same ports by `vifs` (a newer binding), keeping the others. */
function mergeVifs(recorded: NetworkInfo, vifs: NetworkInfo): NetworkInfo {
  const fresh = new Map(vifs.map((v) => [v.id, v]));
  return recorded.map((v) => fresh.get(v.id) ?? v);
}

/** `VirtDriver.plugVifs`. */
export async function plugVifs(host: QemuHost, ref: InstanceRef, vifs: NetworkInfo): Promise<void> {
  checkSpec({ uuid: ref.uuid, name: ref.name, flavor: { vcpus: 1, memory_mb: 1, root_gb: 0, ephemeral_gb: 0, swap: 0, extra_specs: {} }, allocations: {}, network_info: vifs });
  await host.table.withLock(ref.uuid, async () => {
    await plugAll(host, ref.uuid, vifs);
    const m = host.table.active.get(ref.uuid);
    if (m?.rec.vifs) await host.table.save(m, { vifs: mergeVifs(m.rec.vifs, vifs) });
    host.log.info({ instance: ref.uuid, ports: vifs.map((v) => v.id) }, 'VIFs plugged');
  });
}

/** `VirtDriver.unplugVifs`. */
export async function unplugVifs(host: QemuHost, ref: InstanceRef, vifs: NetworkInfo): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    for (const vif of vifs) await host.plugger.unplug(vif);
    host.log.info({ instance: ref.uuid, ports: vifs.map((v) => v.id) }, 'VIFs unplugged');
  });
}

/** Whether the instance's QEMU runs. */
async function running(m: Managed): Promise<boolean> {
  return m.vm !== undefined && (await m.vm.alive());
}

/** The lowest slot no NIC of `nics` uses. @throws DriverError when all are taken */
function freeSlot(uuid: string, nics: readonly NicDefinition[]): number {
  for (let slot = 0; slot < NIC_SLOTS; slot++) if (!nics.some((n) => n.slot === slot)) return slot;
  throw new DriverError(`instance ${uuid} has ${NIC_SLOTS} NICs already; no slot for another`);
}

/** `VirtDriver.attachInterface`. */
export async function attachInterface(host: QemuHost, ref: InstanceRef, vif: Vif): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'attach an interface');
    const nics = m.rec.vm.nics;
    if (nics === undefined) throw new DriverError(`instance ${ref.uuid} was created before NIC support (no NIC slots in its definition); cold-migrate or rebuild it to attach interfaces`);
    if (nics.some((n) => n.port === vif.id)) return;
    const [base] = nicDefinitions([vif]);
    const nic: NicDefinition = { ...(base as NicDefinition), slot: freeSlot(ref.uuid, nics) };
    await host.plugger.plug(vif, ref.uuid);
    try {
      if (await running(m)) {
        const vm = m.vm!;
        await vm.execute('netdev_add', nicNetdev(nic));
        try {
          await vm.execute('device_add', nicDevice(m.rec.vm.machine, nic));
        } catch (e) {
          await vm.execute('netdev_del', { id: netdevId(nic.slot) }).catch(() => undefined);
          throw e;
        }
      }
      await host.table.save(m, { vm: { ...m.rec.vm, nics: [...nics, nic] }, vifs: [...(m.rec.vifs ?? []), vif] });
    } catch (e) {
      await host.plugger.unplug(vif).catch(() => undefined);
      throw e;
    }
    host.log.info({ instance: ref.uuid, port: vif.id, slot: nic.slot, hot: m.vm !== undefined }, 'interface attached');
  });
}

/** `VirtDriver.detachInterface`. */
export async function detachInterface(host: QemuHost, ref: InstanceRef, vif: Vif, policy: DetachPolicy = host.opts.deviceDetach): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'detach an interface');
    const nic = m.rec.vm.nics?.find((n) => n.port === vif.id);
    if (nic && (await running(m))) {
      const vm = m.vm!;
      const device = nicDeviceId(nic.slot);
      try {
        await releaseDevice(vm, device, policy, (attempt) => host.log.info({ instance: ref.uuid, port: vif.id, device, attempt }, 'the guest has not released the NIC yet: asking again'));
      } catch (e) {
        if (e instanceof DeviceNotReleasedError) throw new DriverError(`instance ${ref.uuid}: the guest did not release NIC ${device} (port ${vif.id}) within ${e.timeoutMs} ms of requests; it stays attached`, { cause: e });
        throw e;
      }
      await vm.execute('netdev_del', { id: netdevId(nic.slot) }).catch((e: unknown) => {
        if (!(e instanceof QmpCommandError)) throw e;
      });
    }
    const recorded = m.rec.vifs?.find((v) => v.id === vif.id) ?? vif;
    await host.plugger.unplug(recorded);
    if (nic || recorded !== vif) {
      await host.table.save(m, { vm: { ...m.rec.vm, nics: (m.rec.vm.nics ?? []).filter((n) => n.port !== vif.id) }, vifs: (m.rec.vifs ?? []).filter((v) => v.id !== vif.id) });
    }
    host.log.info({ instance: ref.uuid, port: vif.id, found: nic !== undefined }, 'interface detached');
  });
}
