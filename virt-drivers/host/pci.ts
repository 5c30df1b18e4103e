/**
 * PCI helpers for the GPU and NIC probes: address normalisation and the sysfs attributes of one
 * PCI function (/sys/bus/pci/devices/<address>/...).
 *
 * It is: read-only sysfs parsing, with the address as the device's identity everywhere in the
 * agent (`dddd:bb:ss.f`, lower case). It is not: a PCI database; names come from vendor tools.
 */
import { posix } from 'node:path';
import type { HostFs } from './host-fs';
import { ProbeDataError } from './probe';

export const PCI_DEVICES = '/sys/bus/pci/devices';

const ADDRESS = /^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$/;

/**
 * The canonical form of a PCI address: nvidia-smi prints an 8-digit domain ("00000000:1B:00.0"),
 * sysfs a 4-digit one ("0000:1b:00.0"). @throws ProbeDataError
 */
export function normalizePciAddress(source: string, raw: string): string {
  const m = ADDRESS.exec(raw.trim());
  if (!m) throw new ProbeDataError(source, 'a PCI address such as 0000:3b:00.0', raw);
  const [, domain = '', bus = '', slot = '', fn = ''] = m;
  return `${domain.slice(-4)}:${bus}:${slot}.${fn}`.toLowerCase();
}

/** Whether `raw` is a PCI address in either form. */
export function isPciAddress(raw: string): boolean {
  return ADDRESS.test(raw.trim());
}

/** `0000:3b:00.0` -> `pci_0000_3b_00_0`, libvirt's node-device name, used in provider names. */
export function pciDeviceName(address: string): string {
  return `pci_${address.replace(/[:.]/g, '_')}`;
}

/** The physical card of a function: the address without the function number. */
export function pciSlot(address: string): string {
  return address.replace(/\.[0-7]$/, '');
}

/** What sysfs says about one PCI function. */
export interface PciFunction {
  readonly address: string;
  readonly vendorId: string;
  readonly deviceId: string;
  /** Six hex digits: base class, subclass, programming interface. */
  readonly classCode: string;
  readonly numaNode?: number;
  readonly driver?: string;
  /** A virtual function (`physfn` exists); `physfn` is its PF's address. */
  readonly physfn?: string;
  readonly sriovTotalVfs?: number;
  readonly sriovNumVfs?: number;
  /** The firmware console device (`boot_vga` = 1). */
  readonly bootVga: boolean;
}

function hexId(source: string, raw: string | undefined, digits: number): string {
  const v = (raw ?? '').trim().toLowerCase().replace(/^0x/, '');
  if (!new RegExp(`^[0-9a-f]{${digits}}$`).test(v)) throw new ProbeDataError(source, `a hex id such as 0x${'0'.repeat(digits)}`, raw ?? '<missing>');
  return v;
}

function optInt(source: string, raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (!/^-?\d+$/.test(raw)) throw new ProbeDataError(source, 'an integer', raw);
  return Number(raw);
}

/** Reads one PCI function. @throws ProbeDataError on malformed attributes, HostReadError */
export async function readPciFunction(fs: HostFs, address: string): Promise<PciFunction> {
  const base = `${PCI_DEVICES}/${address}`;
  const [vendor, device, cls, numa, driverLink, physfnLink, total, num, bootVga] = await Promise.all([
    fs.readValue(`${base}/vendor`),
    fs.readValue(`${base}/device`),
    fs.readValue(`${base}/class`),
    fs.readValue(`${base}/numa_node`),
    fs.resolveLink(`${base}/driver`),
    fs.resolveLink(`${base}/physfn`),
    fs.readValue(`${base}/sriov_totalvfs`),
    fs.readValue(`${base}/sriov_numvfs`),
    fs.readValue(`${base}/boot_vga`),
  ]);
  const numaNode = optInt(`${base}/numa_node`, numa);
  const sriovTotalVfs = optInt(`${base}/sriov_totalvfs`, total);
  const sriovNumVfs = optInt(`${base}/sriov_numvfs`, num);
  return {
    address,
    vendorId: hexId(`${base}/vendor`, vendor, 4),
    deviceId: hexId(`${base}/device`, device, 4),
    classCode: hexId(`${base}/class`, cls, 6),
    // The kernel writes -1 when the platform does not say.
    ...(numaNode !== undefined && numaNode >= 0 ? { numaNode } : {}),
    ...(driverLink ? { driver: posix.basename(driverLink) } : {}),
    ...(physfnLink ? { physfn: posix.basename(physfnLink) } : {}),
    ...(sriovTotalVfs !== undefined ? { sriovTotalVfs } : {}),
    ...(sriovNumVfs !== undefined ? { sriovNumVfs } : {}),
    bootVga: bootVga === '1',
  };
}

/** Addresses of every PCI function sysfs lists; undefined when there is no PCI bus in sysfs. */
export async function listPciAddresses(fs: HostFs): Promise<string[] | undefined> {
  if (!(await fs.isDirectory(PCI_DEVICES))) return undefined;
  return (await fs.list(PCI_DEVICES)).filter(isPciAddress);
}
