/**
 * Names and uuids of the providers a driver creates under the compute node.
 *
 * Names follow nova: a GPU child is `<nodename>_pci_<dddd_bb_ss_f>` (libvirt's node-device name,
 * as nova's libvirt driver names pGPU providers), a NIC child `<nodename>:<ifname>` (as neutron's
 * agents name theirs).
 *
 * Uuids are derived, not random: uuid v5 of the root provider's uuid and the device's stable key
 * (`gpu:<pci address>`, `nic:<pci address>`). A device that is renamed (an interface renamed by
 * udev) therefore keeps its provider, even across agent restarts, and the driver renames the
 * provider instead of deleting it and stranding its allocations. Two hosts never collide: the root
 * uuid is unique.
 */
import { createHash } from 'node:crypto';
import { pciDeviceName } from '../host/pci';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** RFC 4122 version-5 (SHA-1, name-based) uuid of `name` in `namespace`. @throws TypeError for a bad namespace */
export function uuidV5(namespace: string, name: string): string {
  if (!UUID.test(namespace)) throw new TypeError(`namespace ${namespace} is not a uuid`);
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  hash[6] = ((hash[6] ?? 0) & 0x0f) | 0x50;
  hash[8] = ((hash[8] ?? 0) & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The provider name of a GPU: `<nodename>_pci_0000_3b_00_0`. */
export function gpuProviderName(nodename: string, address: string): string {
  return `${nodename}_${pciDeviceName(address)}`;
}

/** The provider name of a NIC: `<nodename>:<ifname>`. */
export function nicProviderName(nodename: string, ifname: string): string {
  return `${nodename}:${ifname}`;
}

/** Whether `name` is a GPU provider name of `nodename`; returns the PCI address if so. */
export function gpuAddressFromName(nodename: string, name: string): string | undefined {
  const prefix = `${nodename}_pci_`;
  if (!name.startsWith(prefix)) return undefined;
  const m = /^([0-9a-f]{4})_([0-9a-f]{2})_([0-9a-f]{2})_([0-7])$/.exec(name.slice(prefix.length));
  return m ? `${m[1]}:${m[2]}:${m[3]}.${m[4]}` : undefined;
}

/** A name the kernel accepts for an interface (`dev_valid_name`): 1-15 characters, no '/', ':' or white space, not '.' or '..'. */
const IFNAME = /^(?!\.{1,2}$)[^/:\s]{1,15}$/;

/**
 * Whether `name` is a NIC provider name of `nodename`: `<nodename>:<interface name>`. Neutron
 * names its own providers under the same root `<nodename>:<agent type>[:<bridge>]` (`OVN
 * Controller agent`, `Open vSwitch agent`); an agent type has spaces, which no interface name
 * has, so those are never taken for the driver's.
 */
export function isNicProviderName(nodename: string, name: string): boolean {
  return name.startsWith(`${nodename}:`) && IFNAME.test(name.slice(nodename.length + 1));
}

/** The uuid of a device's provider under the root `rootUuid`. */
export function deviceProviderUuid(rootUuid: string, key: string): string {
  return uuidV5(rootUuid, key);
}
