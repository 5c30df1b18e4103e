/**
 * volumes: what attaching and detaching a Cinder RBD volume costs the agent, on real QEMU (TCG)
 * and a real single-node Ceph of the scenario's own, with Cinder's and the guest's time taken out:
 *
 * - time: N 1 GiB volumes (4; 2 with `--quick`) are attached to and detached from one running net
 *   guest R times (10; 3), one at a time, through the agent's method rows (`reserve_block_device_name`
 *   + `attach_volume`, `detach_volume`). Each is split, from instrumentation in the same run
 *   (`volumes-host.ts`), into Cinder's calls (an in-process stand-in), QEMU's answers to the driver's
 *   QMP commands, the guest's release of the device (device_del answered to DEVICE_DELETED), and
 *   what is left: the agent's own time, the compute flow's and the driver's code. p50 and max.
 * - memory: QEMU's RSS (private anonymous and file-backed, and PSS) with no volume, one, and N
 *   attached (each seen and read or written by the guest), and after detaching them all; the agent's
 *   V8 heap after a full collection and its records' bytes, with none and with N.
 *
 * Skipped, with the reason in the table, where the machine cannot run it (`volumesUnavailable`).
 * Numbers are reported, never asserted; there is no baseline typed in (README, "volumes").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { percentile, round, type BenchOptions, type BenchResult, type BenchRow } from './lib';
import { BenchCeph } from './volumes-ceph';
import { TimedCinder } from './volumes-cinder';
import { netGuestImage, processMemory, reapQemus, volumesUnavailable, type ProcessMemory } from './volumes-guest';
import { VolumeHost, type FlowSample } from './volumes-host';
import { heapUsedAfterGc } from './volumes-probes';

const S = 'volumes, qemu (TCG) + Ceph RBD';
const log = (line: string): boolean => process.stderr.write(`bench: volumes: ${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** librbd starts threads and fills buffers after the image is open: memory is read this long after the guest's I/O. */
const SETTLE_MS = 3000;

interface RecordBytes {
  readonly journal: number;
  readonly driver: number;
}

interface MemoryPhase {
  /** First pass, on a fresh QEMU: none, the first volume (the rbd block module and librbd loaded by it), all, all detached. */
  readonly none: ProcessMemory;
  readonly one: ProcessMemory;
  readonly all: ProcessMemory;
  readonly afterDetach: ProcessMemory;
  /** Second pass (the code of both flows has run once, in the agent and in QEMU): none, then all attached again. */
  readonly warm: { readonly none: ProcessMemory; readonly all: ProcessMemory };
  readonly heapBytes: { readonly none: number; readonly all: number; readonly afterDetach: number };
  readonly recordBytes: { readonly none: RecordBytes; readonly all: RecordBytes };
  /** The first attach on this QEMU. */
  readonly cold: FlowSample;
}

/** Attaches `volumes` one after the other, each seen and used by the guest; `afterFirst` runs once the first is. @returns the attachments and the first attach's sample */
async function attachAll(host: VolumeHost, volumes: readonly string[], afterFirst: () => Promise<void>): Promise<{ attachments: string[]; first: FlowSample }> {
  const attachments: string[] = [];
  let first: FlowSample | undefined;
  for (const v of volumes) {
    const a = await host.attach(v);
    attachments.push(a.attachment);
    await host.guest.sawAndUsed(v);
    if (first === undefined) {
      first = a.sample;
      await afterFirst();
    }
  }
  if (first === undefined) throw new Error('no volume to attach');
  return { attachments, first };
}

async function detachAll(host: VolumeHost, volumes: readonly string[], attachments: readonly string[]): Promise<void> {
  for (const [k, v] of volumes.entries()) {
    await host.detach(v, attachments[k] ?? '');
    await host.guest.until(`volume ${v} gone`, (l) => l.kind === 'gone');
  }
}

/** QEMU's memory after librbd settled. */
async function settled(pid: number): Promise<ProcessMemory> {
  await sleep(SETTLE_MS);
  return processMemory(pid);
}

/**
 * Two passes of attaching every volume and detaching them. QEMU's memory is read in the first,
 * on a fresh process; the agent's heap in the second, once the flows' code has run (V8 keeps a
 * function's bytecode on the heap from its first call, which is not a volume's cost).
 */
async function memoryPhase(host: VolumeHost, volumes: readonly string[]): Promise<MemoryPhase> {
  const pid = host.qemuPid();
  const none = await settled(pid);
  let one: ProcessMemory | undefined;
  const first = await attachAll(host, volumes, async () => void (one = await settled(pid)));
  const all = await settled(pid);
  await detachAll(host, volumes, first.attachments);
  const afterDetach = await settled(pid);

  const warmNone = await settled(pid);
  const heapNone = await heapUsedAfterGc();
  const recNone = host.recordBytes();
  const second = await attachAll(host, volumes, () => Promise.resolve());
  const warmAll = await settled(pid);
  const heapAll = await heapUsedAfterGc();
  const recAll = host.recordBytes();
  await detachAll(host, volumes, second.attachments);
  const heapAfter = await heapUsedAfterGc();
  if (!one) throw new Error('no volume was attached');
  return { none, one, all, afterDetach, warm: { none: warmNone, all: warmAll }, heapBytes: { none: heapNone, all: heapAll, afterDetach: heapAfter }, recordBytes: { none: recNone, all: recAll }, cold: first.first };
}

/** R attach-and-detach cycles, one volume at a time, cycling over `volumes`. */
async function timingPhase(host: VolumeHost, volumes: readonly string[], rounds: number): Promise<{ attach: FlowSample[]; detach: FlowSample[] }> {
  const attach: FlowSample[] = [];
  const detach: FlowSample[] = [];
  for (let i = 0; i < rounds; i++) {
    const v = volumes[i % volumes.length] as string;
    const a = await host.attach(v);
    attach.push(a.sample);
    const disk = await host.guest.sawAndUsed(v);
    detach.push(await host.detach(v, a.attachment));
    await host.guest.until(`${disk} gone`, (l) => l.kind === 'gone' && l.disk === disk);
  }
  return { attach, detach };
}

/** The parts of one sample, in ms: what the rows report. */
function parts(s: FlowSample): Record<'agent' | 'qemu' | 'code' | 'compute' | 'journal' | 'driver' | 'cinder' | 'guest' | 'total', number> {
  const total = s.reserveMs + s.flowMs;
  return {
    total,
    cinder: s.cinderMs,
    guest: s.guestMs,
    qemu: s.qmpMs,
    // The agent's time less Cinder's and the guest's; QEMU's answers are still in it.
    agent: total - s.cinderMs - s.guestMs,
    code: total - s.cinderMs - s.guestMs - s.qmpMs,
    compute: total - s.cinderMs - s.driverMs,
    journal: s.journalMs,
    driver: s.driverMs - s.qmpMs - s.guestMs,
  };
}

const stat = (samples: readonly FlowSample[], key: keyof ReturnType<typeof parts>): string => {
  const v = samples.map((s) => parts(s)[key]);
  return `${round(percentile(v, 50), 2)} / ${round(Math.max(...v), 2)} ms`;
};

function timeRows(op: 'attach' | 'detach', samples: readonly FlowSample[]): BenchRow[] {
  const n = `${samples.length} ${op}es`;
  const rows: BenchRow[] = [
    { scenario: S, metric: `${op}: ${op === 'attach' ? 'reserve_block_device_name + attach_volume' : 'detach_volume'}, p50 / max over ${n}`, value: stat(samples, 'total') },
    { scenario: S, metric: `${op}: Cinder's calls (in-process stand-in)`, value: stat(samples, 'cinder') },
  ];
  if (op === 'detach') rows.push({ scenario: S, metric: "detach: the guest's release (device_del answered to DEVICE_DELETED)", value: stat(samples, 'guest') });
  rows.push(
    { scenario: S, metric: `${op}: agent's own time (less Cinder${op === 'detach' ? ' and the guest' : '; an attach waits for no guest'})`, value: stat(samples, 'agent') },
    { scenario: S, metric: `${op}: of which QEMU answering the driver's QMP commands`, value: stat(samples, 'qemu') },
    { scenario: S, metric: `${op}: of which the agent's code (less QMP too)`, value: stat(samples, 'code') },
    { scenario: S, metric: `${op}: - the compute flow (less Cinder and the driver)`, value: stat(samples, 'compute') },
    { scenario: S, metric: `${op}: - of it, its journal records (written, fsync'd)`, value: stat(samples, 'journal') },
    { scenario: S, metric: `${op}: - the driver's own code (less QMP${op === 'detach' ? ' and the guest' : ''})`, value: stat(samples, 'driver') },
  );
  return rows;
}

const mb = (x: number): number => round(x, 1);
/** A change with its sign. */
const signed = (x: number): string => (x >= 0 ? `+${x}` : String(x));
const memText = (m: ProcessMemory): string => `RSS ${mb(m.rss)} MB (anon ${mb(m.anon)}, file ${mb(m.file)}), PSS ${mb(m.pss)} MB`;
const deltaText = (a: ProcessMemory, b: ProcessMemory, per: number): string => {
  const d = (k: keyof ProcessMemory): string => signed(mb((b[k] - a[k]) / per));
  return `RSS ${d('rss')} MB (anon ${d('anon')}, file ${d('file')}), PSS ${d('pss')} MB`;
};

function memoryRows(m: MemoryPhase, n: number): BenchRow[] {
  const heapKb = (bytes: number): string => signed(round((bytes - m.heapBytes.none) / 1024 / n, 1));
  const journal = round((m.recordBytes.all.journal - m.recordBytes.none.journal) / n, 0);
  const driver = round((m.recordBytes.all.driver - m.recordBytes.none.driver) / n, 0);
  const cold = parts(m.cold);
  return [
    { scenario: S, metric: 'first attach on a fresh QEMU: agent (less Cinder) / of which QEMU', value: `${round(cold.agent, 1)} / ${round(cold.qemu, 1)} ms` },
    { scenario: S, metric: 'QEMU, no volume', value: memText(m.none) },
    { scenario: S, metric: 'QEMU, the first volume (loads the rbd block module and librbd)', value: deltaText(m.none, m.one, 1) },
    ...(n > 1 ? [{ scenario: S, metric: `QEMU, each further volume (${n - 1} more)`, value: deltaText(m.one, m.all, n - 1) }] : []),
    { scenario: S, metric: `QEMU per volume, ${n} attached ((all - none) / ${n})`, value: deltaText(m.none, m.all, n) },
    { scenario: S, metric: `QEMU after detaching all ${n}, against no volume`, value: deltaText(m.none, m.afterDetach, 1) },
    { scenario: S, metric: `QEMU per volume, ${n} attached again (second pass)`, value: deltaText(m.warm.none, m.warm.all, n) },
    { scenario: S, metric: 'agent per volume, V8 heap after a full GC (second pass): attached / left after detaching them', value: `${heapKb(m.heapBytes.all)} / ${heapKb(m.heapBytes.afterDetach)} KB` },
    { scenario: S, metric: "agent per volume: the instance's journal record / the driver's instance.json", value: `${journal} / ${driver} B` },
  ];
}

export async function runVolumesBench(opts: BenchOptions): Promise<BenchResult> {
  const unavailable = volumesUnavailable();
  if (unavailable) return { name: 'volumes', rows: [{ scenario: S, metric: 'skipped', value: unavailable }], details: { skipped: unavailable } };
  const n = opts.quick ? 2 : 4;
  const rounds = opts.quick ? 3 : 10;
  const dir = mkdtempSync('/tmp/ca-bvol-');
  let port = 0;
  let host: VolumeHost | undefined;
  try {
    let t = Date.now();
    const ceph = await BenchCeph.up(dir, (p) => (port = p));
    const cephUpS = (Date.now() - t) / 1000;
    log(`ceph-stack up on ${port}: ${cephUpS.toFixed(1)} s`);
    const secrets = join(dir, 'secrets');
    await ceph.writeKey(secrets);
    const volumes = Array.from({ length: n }, () => randomUUID());
    for (const v of volumes) await ceph.createVolume(v);
    const cinder = new TimedCinder(ceph.target);
    host = await VolumeHost.start(join(dir, 'agent'), netGuestImage(), secrets, cinder);
    t = Date.now();
    await host.boot();
    const bootS = (Date.now() - t) / 1000;
    log(`net guest booted (128 MiB, TCG): ${bootS.toFixed(1)} s`);
    const memory = await memoryPhase(host, volumes);
    log(`memory: none ${memText(memory.none)}; ${n} attached ${memText(memory.all)}`);
    const times = await timingPhase(host, volumes, rounds);
    // Heap kept per cycle: what the agent would keep per attach and detach over its life (the
    // samples this bench keeps, under 1 KB a cycle, are in it).
    const heapPerCycleKb = round((await heapUsedAfterGc() - memory.heapBytes.afterDetach) / 1024 / rounds, 1);
    log(`${rounds} attach/detach cycles done`);
    const rows: BenchRow[] = [
      { scenario: S, metric: 'volumes / attach-detach cycles', value: `${n} x 1 GiB / ${rounds}` },
      ...timeRows('attach', times.attach),
      ...timeRows('detach', times.detach),
      ...memoryRows(memory, n),
      { scenario: S, metric: `agent: V8 heap after a full GC, change per attach-detach cycle (over the ${rounds} timed)`, value: `${signed(heapPerCycleKb)} KB` },
    ];
    return { name: 'volumes', rows, details: { volumes: n, rounds, cephPort: port, cephUpSeconds: cephUpS, guestBootSeconds: bootS, heapPerCycleKb, attach: times.attach, detach: times.detach, memory } };
  } finally {
    await host?.close();
    const reaped = reapQemus(dir);
    if (reaped) log(`killed ${reaped} QEMU left under ${dir}`);
    if (port) {
      const err = await BenchCeph.reset(dir, port);
      if (err) log(`ceph-stack reset: ${err}`);
    }
    rmSync(dir, { recursive: true, force: true });
  }
}
