/**
 * GPU probe: every physical GPU on the PCI bus, with what the vendor's driver or tool adds.
 *
 * Sources, in order:
 * 1. /sys/bus/pci/devices/*: every function of PCI base class 0x03 (VGA, 3D, display
 *    controller). This sees GPUs whatever driver holds them, including vfio-pci (passthrough),
 *    where no vendor tool can. The firmware console GPU (`boot_vga` = 1, e.g. a BMC's VGA) is
 *    skipped: the host needs it.
 * 2. /sys/class/mdev_bus/<address>/mdev_supported_types: vGPU types. An SR-IOV virtual function
 *    is reported only when it offers mdev types (NVIDIA vGPU on Ampere and later), and then its
 *    physical function is not reported (its capacity is offered through the VFs).
 * 3. NVIDIA GPUs bound to the `nvidia` driver: `nvidia-smi` (model, memory, compute capability,
 *    MIG mode and instances). If nvidia-smi is missing, fails or hangs, those GPUs are reported
 *    `incomplete` (their MIG state is unknown) and everything else still is.
 * 4. AMD (amdgpu) and Intel (i915): the DRM card bound to the device (/sys/class/drm/card<N>,
 *    matched by its `device` link): `device/mem_info_vram_total` and `device/product_name`
 *    (amdgpu), `lmem_total_bytes` (i915 discrete). A GPU with no DRM card (vfio-pci) is still
 *    reported, from its PCI ids alone.
 *
 * systeminformation's `graphics()` is not used: it scrapes `lspci -vvv` text (no numeric ids, VRAM
 * from the largest BAR), calls nvidia-smi with execFileSync and no timeout, runs dmidecode, xrandr
 * and clinfo, and swallows every failure.
 */
import { CommandNotFoundError } from './exec';
import type { GpuFacts, GpuVendor } from './facts';
import type { HostFs } from './host-fs';
import { mdevParents, readMdevTypes } from './mdev';
import { queryNvidia, type NvidiaReport } from './nvidia-smi';
import { listPciAddresses, PCI_DEVICES, readPciFunction, type PciFunction } from './pci';
import type { Probe, ProbeEnv, ProbeResult } from './probe';

const VENDORS: Readonly<Record<string, GpuVendor>> = { '10de': 'nvidia', '1002': 'amd', '8086': 'intel' };

/** A PCI function is a GPU when its base class is 0x03 (display controller). */
export function isDisplayClass(classCode: string): boolean {
  return classCode.startsWith('03');
}

const DRM = '/sys/class/drm';

/** PCI address -> DRM card directory (`/sys/class/drm/card1`), for cards with a PCI device. */
async function drmCards(fs: HostFs): Promise<Map<string, string>> {
  const cards = (await fs.list(DRM)).filter((n) => /^card\d+$/.test(n));
  const out = new Map<string, string>();
  for (const card of cards) {
    const device = await fs.resolveLink(`${DRM}/${card}/device`);
    const address = device?.split('/').pop();
    if (address && !out.has(address)) out.set(address, `${DRM}/${card}`);
  }
  return out;
}

async function drmExtras(fs: HostFs, card: string | undefined): Promise<Pick<GpuFacts, 'model' | 'memoryMb'>> {
  if (!card) return {};
  const [vram, lmem, product] = await Promise.all([
    fs.readValue(`${card}/device/mem_info_vram_total`),
    fs.readValue(`${card}/lmem_total_bytes`),
    fs.readValue(`${card}/device/product_name`),
  ]);
  const raw = vram ?? lmem;
  const bytes = raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : undefined;
  return {
    ...(product ? { model: product } : {}),
    ...(bytes ? { memoryMb: Math.floor(bytes / 1024 / 1024) } : {}),
  };
}

async function candidates(fs: HostFs, addresses: string[]): Promise<{ gpus: PciFunction[]; mdev: Set<string> }> {
  const mdev = await mdevParents(fs);
  // Read the class first: only display controllers are read in full (and validated).
  const classes = await Promise.all(addresses.map(async (a) => ({ a, cls: await fs.readValue(`${PCI_DEVICES}/${a}/class`) })));
  const display = classes.filter((c) => isDisplayClass((c.cls ?? '').toLowerCase().replace(/^0x/, ''))).map((c) => c.a);
  const fns = (await Promise.all(display.map((a) => readPciFunction(fs, a)))).filter((f) => !f.bootVga);
  const pfsServedByVfs = new Set(fns.filter((f) => f.physfn && mdev.has(f.address)).map((f) => f.physfn));
  const gpus = fns.filter((f) => (f.physfn ? mdev.has(f.address) : !pfsServedByVfs.has(f.address)));
  return { gpus, mdev };
}

async function nvidiaReport(env: ProbeEnv, needed: boolean): Promise<{ report?: NvidiaReport; problem?: string }> {
  if (!needed) return {};
  try {
    return { report: await queryNvidia(env.exec, env.options.commandTimeoutMs, env.signal) };
  } catch (e) {
    const why = e instanceof CommandNotFoundError ? 'nvidia-smi is not installed' : e instanceof Error ? e.message : String(e);
    return { problem: why };
  }
}

export const gpuProbe: Probe<GpuFacts[]> = {
  name: 'gpu',
  async run(env): Promise<ProbeResult<GpuFacts[]>> {
    const { fs } = env;
    const addresses = await listPciAddresses(fs);
    if (addresses === undefined) return { detected: false, reason: `${PCI_DEVICES} does not exist` };
    const { gpus, mdev } = await candidates(fs, addresses);
    if (gpus.length === 0) return { detected: false, reason: 'no PCI display controller (class 03) besides the console' };
    const cards = await drmCards(fs);

    const onNvidiaDriver = gpus.filter((g) => VENDORS[g.vendorId] === 'nvidia' && g.driver === 'nvidia');
    const { report, problem } = await nvidiaReport(env, onNvidiaDriver.length > 0);
    const byAddress = new Map((report?.gpus ?? []).map((g) => [g.address, g]));
    const warnings: string[] = problem ? [`nvidia-smi: ${problem}; MIG state of ${onNvidiaDriver.map((g) => g.address).join(', ')} unknown`] : [];

    const facts = await Promise.all(
      gpus.map(async (fn): Promise<GpuFacts> => {
        const vendor = VENDORS[fn.vendorId] ?? 'other';
        const mdevTypes = mdev.has(fn.address) ? await readMdevTypes(fs, fn.address) : [];
        const common = {
          address: fn.address,
          vendorId: fn.vendorId,
          deviceId: fn.deviceId,
          vendor,
          ...(fn.numaNode !== undefined ? { numaNode: fn.numaNode } : {}),
          ...(fn.driver ? { driver: fn.driver } : {}),
          mdevTypes,
        };
        if (vendor !== 'nvidia') return { ...common, ...(await drmExtras(fs, cards.get(fn.address))) };
        if (fn.driver !== 'nvidia') return common;
        const row = byAddress.get(fn.address);
        if (!row) {
          const why = problem ?? 'nvidia-smi does not list it';
          if (!problem) warnings.push(`nvidia-smi does not list ${fn.address}; its MIG state is unknown`);
          return { ...common, incomplete: why };
        }
        return {
          ...common,
          model: row.name,
          ...(row.memoryMb !== undefined ? { memoryMb: row.memoryMb } : {}),
          ...(row.computeCapability ? { computeCapability: row.computeCapability } : {}),
          migEnabled: row.migEnabled,
          ...(row.migEnabled ? { migProfiles: report?.mig.get(fn.address) ?? [] } : {}),
        };
      }),
    );
    return { detected: true, data: facts, warnings };
  },
};
