/**
 * Mediated-device (vGPU) types of a parent device, from
 * /sys/class/mdev_bus/<address>/mdev_supported_types/<type>/{name,available_instances,devices/}.
 *
 * It is: sysfs reading only. It is not: mdev creation; the hypervisor driver creates mdevs when
 * it spawns an instance.
 */
import type { MdevTypeFacts } from './facts';
import type { HostFs } from './host-fs';
import { naturalCompare } from './natural-order';
import { parseIntStrict } from './probe';

export const MDEV_BUS = '/sys/class/mdev_bus';

/** Parent device addresses that offer mediated devices. */
export async function mdevParents(fs: HostFs): Promise<Set<string>> {
  return new Set(await fs.list(MDEV_BUS));
}

/** The mdev types `address` offers, sorted by type name. @throws ProbeDataError, HostReadError */
export async function readMdevTypes(fs: HostFs, address: string): Promise<MdevTypeFacts[]> {
  const dir = `${MDEV_BUS}/${address}/mdev_supported_types`;
  const types = await fs.list(dir);
  const out = await Promise.all(
    types.map(async (type): Promise<MdevTypeFacts> => {
      const [name, available, devices] = await Promise.all([
        fs.readValue(`${dir}/${type}/name`),
        fs.readValue(`${dir}/${type}/available_instances`),
        fs.list(`${dir}/${type}/devices`),
      ]);
      return {
        type,
        ...(name ? { name } : {}),
        availableInstances: parseIntStrict(`${dir}/${type}/available_instances`, available, 'a count of instances'),
        existing: devices.length,
      };
    }),
  );
  return out.sort((a, b) => naturalCompare(a.type, b.type));
}
