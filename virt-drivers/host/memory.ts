/**
 * Memory probe: MemTotal, and huge pages per size, host-wide and per NUMA node.
 *
 * Sources: /proc/meminfo (MemTotal, in kB), /sys/kernel/mm/hugepages/hugepages-<size>kB/ and
 * /sys/devices/system/node/node<N>/{meminfo,hugepages/}. systeminformation's `mem()` reads the
 * same /proc/meminfo asynchronously and is accurate for the total, but it cannot read a fixture
 * tree and knows nothing of huge pages or nodes, so it adds nothing here.
 */
import type { HugepagePool, MemoryFacts, NumaMemoryFacts } from './facts';
import type { HostFs } from './host-fs';
import { parseCpuList, parseIntStrict, ProbeDataError, type Probe, type ProbeResult } from './probe';

const HUGEPAGES = '/sys/kernel/mm/hugepages';
const NODE = '/sys/devices/system/node';

/** The value of `key` in a meminfo-style text, in kB. @throws ProbeDataError when malformed */
export function meminfoKb(source: string, text: string, key: string): number | undefined {
  const re = new RegExp(`^(?:Node \\d+ )?${key}:\\s*(\\S+)(?:\\s+kB)?\\s*$`, 'm');
  const m = re.exec(text);
  if (!m) return undefined;
  return parseIntStrict(`${source} ${key}`, m[1], 'a size in kB');
}

async function pools(fs: HostFs, dir: string): Promise<HugepagePool[]> {
  const names = (await fs.list(dir)).filter((n) => /^hugepages-\d+kB$/.test(n));
  const out = await Promise.all(
    names.map(async (name) => {
      const sizeKb = Number(/\d+/.exec(name)?.[0]);
      const totalRaw = await fs.readValue(`${dir}/${name}/nr_hugepages`);
      const freeRaw = await fs.readValue(`${dir}/${name}/free_hugepages`);
      if (totalRaw === undefined) return undefined;
      const pool: HugepagePool = {
        sizeKb,
        total: parseIntStrict(`${dir}/${name}/nr_hugepages`, totalRaw),
        ...(freeRaw === undefined ? {} : { free: parseIntStrict(`${dir}/${name}/free_hugepages`, freeRaw) }),
      };
      return pool;
    }),
  );
  return out.filter((p): p is HugepagePool => p !== undefined).sort((a, b) => a.sizeKb - b.sizeKb);
}

async function nodes(fs: HostFs): Promise<NumaMemoryFacts[]> {
  const online = await fs.readValue(`${NODE}/online`);
  if (online === undefined) return [];
  return Promise.all(
    parseCpuList(`${NODE}/online`, online).map(async (id) => {
      const base = `${NODE}/node${id}`;
      const meminfo = await fs.read(`${base}/meminfo`);
      const kb = meminfo === undefined ? undefined : meminfoKb(`${base}/meminfo`, meminfo, 'MemTotal');
      return {
        id,
        ...(kb === undefined ? {} : { memoryMb: Math.floor(kb / 1024) }),
        hugepages: await pools(fs, `${base}/hugepages`),
      };
    }),
  );
}

export const memoryProbe: Probe<MemoryFacts> = {
  name: 'memory',
  async run({ fs }): Promise<ProbeResult<MemoryFacts>> {
    const text = await fs.read('/proc/meminfo');
    if (text === undefined) return { detected: false, reason: '/proc/meminfo does not exist' };
    const kb = meminfoKb('/proc/meminfo', text, 'MemTotal');
    if (kb === undefined) throw new ProbeDataError('/proc/meminfo', 'a "MemTotal: <n> kB" line', text.split('\n')[0] ?? '');
    const [hugepages, numaNodes] = await Promise.all([pools(fs, HUGEPAGES), nodes(fs)]);
    return { detected: true, data: { totalMb: Math.floor(kb / 1024), hugepages, numaNodes } };
  },
};
