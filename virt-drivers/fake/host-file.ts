/**
 * The fake driver's host file: a YAML or JSON description of a host (CPU, memory, NUMA, disk,
 * GPUs, NICs, sharing storage), turned into the same `HostFacts` the real probes produce.
 *
 * It is: strict. Every field is checked; an unknown field (a typo) is an error; each problem is
 * reported as `<file>: <field path>: expected <form>`, all of them at once. A section left out
 * of the file is "not present" on that host. It is not: a way to express probe failures; use a
 * fixture tree and a fake `Exec` for those.
 */
import { z } from 'zod';
import { DriverError } from '../errors';
import type { HostFacts } from '../host/discover';
import type { GpuFacts, GpuVendor, HugepagePool, NicFacts } from '../host/facts';
import { parseCpuList, ProbeDataError, type ProbeOutcome } from '../host/probe';

/** The host file is unreadable or malformed; `problems` has one line per bad field. */
export class HostFileError extends DriverError {
  constructor(
    readonly file: string,
    readonly problems: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(problems.map((p) => `${file}: ${p}`).join('\n'), options);
    this.name = 'HostFileError';
  }
}

const wholeNumber = (what: string, min: number) => {
  const error = `expected ${what} (a whole number >= ${min})`;
  return z.number({ error }).int({ error }).min(min, { error });
};
const count = (what: string) => wholeNumber(what, 0);
const positive = (what: string) => wholeNumber(what, 1);
const text = (what: string) => z.string({ error: `expected ${what} (a string)` }).min(1, { error: `expected ${what} (a non-empty string)` });
const pciAddress = z
  .string({ error: 'expected a PCI address such as "0000:3b:00.0"' })
  .regex(/^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$/, { error: 'expected a PCI address such as "0000:3b:00.0"' })
  .transform((s) => s.toLowerCase());
const hexId = z
  .string({ error: 'expected a 4-digit hex id such as "10de" (quoted)' })
  .regex(/^(0x)?[0-9a-fA-F]{4}$/, { error: 'expected a 4-digit hex id such as "10de" (quoted)' })
  .transform((s) => s.toLowerCase().replace(/^0x/, ''));
const uuid = z.string({ error: 'expected a uuid' }).regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, { error: 'expected a uuid' });

const hugepages = z.array(z.object({ size_kb: positive('a page size in kB'), total: count('a page count'), free: count('a page count').optional() }).strict(), {
  error: 'expected a list of {size_kb, total, free?}',
});

const schema = z
  .object({
    cpu: z
      .object({
        sockets: positive('a socket count'),
        cores_per_socket: positive('a core count'),
        threads_per_core: positive('a thread count'),
        online: positive('a count of logical CPUs').optional(),
        vendor: text('a cpuinfo vendor_id such as GenuineIntel').optional(),
        model: text('a model name').optional(),
        arch: text('an architecture such as x86_64').optional(),
        flags: z.array(text('a cpuinfo flag'), { error: 'expected a list of /proc/cpuinfo flags' }).default([]),
      })
      .strict()
      .optional(),
    memory: z.object({ total_mb: positive('MiB'), hugepages: hugepages.default([]) }).strict().optional(),
    numa: z
      .array(
        z
          .object({
            id: count('a node id'),
            cpus: z.string({ error: 'expected a CPU list such as "0-15,32-47"' }),
            memory_mb: count('MiB').optional(),
            hugepages: hugepages.default([]),
          })
          .strict(),
        { error: 'expected a list of NUMA nodes' },
      )
      .default([]),
    disk: z.object({ total_gb: count('GiB'), available_gb: count('GiB').optional() }).strict().optional(),
    gpus: z
      .array(
        z
          .object({
            address: pciAddress,
            vendor_id: hexId,
            device_id: hexId,
            model: text('a model name').optional(),
            memory_mb: count('MiB').optional(),
            numa_node: count('a node id').optional(),
            driver: text('a kernel driver name').optional(),
            compute_capability: z.string().regex(/^\d+\.\d+$/, { error: 'expected a version such as "9.0"' }).optional(),
            mig: z.array(z.object({ profile: text('a MIG profile such as 1g.10gb'), count: count('a count') }).strict()).optional(),
            mdev_types: z
              .array(z.object({ type: text('an mdev type such as nvidia-35'), name: text('a type name').optional(), available_instances: count('a count'), existing: count('a count').default(0) }).strict())
              .default([]),
          })
          .strict(),
        { error: 'expected a list of GPUs' },
      )
      .optional(),
    nics: z
      .array(
        z
          .object({
            name: text('an interface name'),
            address: pciAddress.optional(),
            driver: text('a kernel driver name').optional(),
            mac: text('a MAC address').optional(),
            speed_mbps: positive('a link speed in Mb/s').optional(),
            sriov_totalvfs: count('a VF count').optional(),
            sriov_numvfs: count('a VF count').optional(),
            numa_node: count('a node id').optional(),
          })
          .strict(),
        { error: 'expected a list of NICs' },
      )
      .optional(),
    shared_storage: z
      .object({
        aggregate: uuid,
        provider: z.object({ uuid, name: text('a provider name'), disk_gb: positive('GiB') }).strict().optional(),
      })
      .strict()
      .optional(),
    uptime_seconds: count('seconds').optional(),
  })
  .strict();

export type HostFileData = z.output<typeof schema>;

/** The sharing storage a host file declares. */
export type SharedStorageSpec = NonNullable<HostFileData['shared_storage']>;

function issueText(issue: z.core.$ZodIssue): string {
  const path = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '');
  const message = issue.code === 'unrecognized_keys' ? `unknown field(s) ${issue.keys.join(', ')}` : issue.message;
  return `${path || '(top level)'}: ${message}`;
}

/** Parses host-file text. @throws HostFileError */
export function parseHostFile(file: string, content: string): HostFileData {
  let raw: unknown;
  try {
    // yaml loads only when a host file is configured: most agents never read one.
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- synchronous lazy load, see above
    raw = (require('yaml') as typeof import('yaml')).parse(content);
  } catch (e) {
    throw new HostFileError(file, [`not valid YAML or JSON: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`], { cause: e });
  }
  const parsed = schema.safeParse(raw ?? {});
  if (!parsed.success) throw new HostFileError(file, parsed.error.issues.map(issueText));
  const d = parsed.data;
  const problems: string[] = [];
  d.numa.forEach((n, i) => {
    try {
      parseCpuList('cpus', n.cpus);
    } catch (e) {
      problems.push(`numa[${i}].cpus: ${e instanceof ProbeDataError ? `expected ${e.expected}` : String(e)}`);
    }
  });
  if (problems.length > 0) throw new HostFileError(file, problems);
  return d;
}

const detected = <T>(data: T): ProbeOutcome<T> => ({ status: 'detected', data, warnings: [], ms: 0 });
const absent = <T>(what: string): ProbeOutcome<T> => ({ status: 'absent', reason: `the host file has no ${what}`, ms: 0 });
const VENDORS: Readonly<Record<string, GpuVendor>> = { '10de': 'nvidia', '1002': 'amd', '8086': 'intel' };
const pools = (list: ReadonlyArray<{ size_kb: number; total: number; free?: number | undefined }>): HugepagePool[] =>
  list.map((p) => ({ sizeKb: p.size_kb, total: p.total, ...(p.free === undefined ? {} : { free: p.free }) }));

/** Host-wide pools as the sum of per-node pools, when the file only gives those. */
function sumPools(list: HugepagePool[]): HugepagePool[] {
  const bySize = new Map<number, { total: number; free: number | undefined }>();
  for (const p of list) {
    const cur = bySize.get(p.sizeKb) ?? { total: 0, free: 0 };
    bySize.set(p.sizeKb, { total: cur.total + p.total, free: cur.free === undefined || p.free === undefined ? undefined : cur.free + p.free });
  }
  return [...bySize]
    .sort(([a], [b]) => a - b)
    .map(([sizeKb, v]) => ({ sizeKb, total: v.total, ...(v.free === undefined ? {} : { free: v.free }) }));
}

function gpuFacts(g: NonNullable<HostFileData['gpus']>[number]): GpuFacts {
  return {
    address: g.address,
    vendorId: g.vendor_id,
    deviceId: g.device_id,
    vendor: VENDORS[g.vendor_id] ?? 'other',
    ...(g.model ? { model: g.model } : {}),
    ...(g.memory_mb === undefined ? {} : { memoryMb: g.memory_mb }),
    ...(g.numa_node === undefined ? {} : { numaNode: g.numa_node }),
    ...(g.driver ? { driver: g.driver } : {}),
    ...(g.compute_capability ? { computeCapability: g.compute_capability } : {}),
    ...(g.mig ? { migEnabled: true, migProfiles: g.mig } : {}),
    mdevTypes: g.mdev_types.map((m) => ({ type: m.type, ...(m.name ? { name: m.name } : {}), availableInstances: m.available_instances, existing: m.existing })),
  };
}

function nicFacts(n: NonNullable<HostFileData['nics']>[number]): NicFacts {
  return {
    name: n.name,
    ...(n.address ? { address: n.address } : {}),
    ...(n.driver ? { driver: n.driver } : {}),
    ...(n.mac ? { mac: n.mac } : {}),
    ...(n.speed_mbps === undefined ? {} : { speedMbps: n.speed_mbps }),
    ...(n.sriov_totalvfs === undefined ? {} : { sriovTotalVfs: n.sriov_totalvfs }),
    ...(n.sriov_numvfs === undefined ? {} : { sriovNumVfs: n.sriov_numvfs }),
    ...(n.numa_node === undefined ? {} : { numaNode: n.numa_node }),
    role: 'port',
  };
}

/** The facts a host file describes, as if probes had found them. */
export function hostFileFacts(d: HostFileData, instancesPath: string): HostFacts {
  const c = d.cpu;
  const online = c ? (c.online ?? c.sockets * c.cores_per_socket * c.threads_per_core) : 0;
  return {
    cpu: c
      ? detected({
          online,
          sockets: c.sockets,
          cores: c.sockets * c.cores_per_socket,
          threadsPerCore: c.threads_per_core,
          ...(c.vendor ? { vendor: c.vendor } : {}),
          ...(c.model ? { model: c.model } : {}),
          ...(c.arch ? { arch: c.arch } : {}),
          flags: [...new Set(c.flags)].sort(),
          numaNodes: d.numa.map((n) => ({ id: n.id, cpus: parseCpuList('cpus', n.cpus) })),
        })
      : absent('cpu'),
    memory: d.memory
      ? detected({
          totalMb: d.memory.total_mb,
          hugepages: d.memory.hugepages.length > 0 ? pools(d.memory.hugepages) : sumPools(d.numa.flatMap((n) => pools(n.hugepages))),
          numaNodes: d.numa.map((n) => ({ id: n.id, ...(n.memory_mb === undefined ? {} : { memoryMb: n.memory_mb }), hugepages: pools(n.hugepages) })),
        })
      : absent('memory'),
    disk: d.disk
      ? detected({ path: instancesPath, measuredPath: instancesPath, totalGb: d.disk.total_gb, availableGb: d.disk.available_gb ?? d.disk.total_gb })
      : absent('disk'),
    gpu: d.gpus && d.gpus.length > 0 ? detected(d.gpus.map(gpuFacts)) : absent('gpus'),
    nic: d.nics && d.nics.length > 0 ? detected(d.nics.map(nicFacts)) : absent('nics'),
  };
}
