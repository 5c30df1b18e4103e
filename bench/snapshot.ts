/**
 * `snapshot`: the qemu driver's snapshot of a running guest streamed to an image service, with the
 * agent's memory sampled throughout. The guest's disk sits on a base image of random data (512 MiB;
 * 64 MiB with `--quick`), larger than the process's RSS, so an agent that held the image in memory
 * would show it. The copy is `blockdev-backup` of the running guest (it runs on: SeaBIOS finds
 * nothing to boot on random data and waits), then the upload: `PATCH` and a streamed `PUT` through
 * the agent's Glance client to an image service stand-in in a child process that counts and drops
 * the bytes (its memory is not the agent's).
 *
 * Baseline, measured in the same run: reading the same number of bytes from a file on the same disk
 * into nothing (what the disk gives a stream). Rows: the copy's time, the upload's time and
 * throughput against the baseline's, the RSS before and its peak during the snapshot.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createReadStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { loadConfig } from '../config/loader';
import { systemClock } from '../lib/clock';
import { silentLogger } from '../lib/logging/logger';
import { StaticGlanceAuth } from '../virt-drivers/glance/api';
import { GlanceHttpClient } from '../virt-drivers/glance/http';
import { ProcessExec } from '../virt-drivers/host/exec';
import { RootedHostFs } from '../virt-drivers/host/host-fs';
import { QemuDriver } from '../virt-drivers/qemu/driver';
import { round, type BenchOptions, type BenchResult } from './lib';
import { reapQemus, volumesUnavailable } from './volumes-guest';

const MIB = 1024 * 1024;

/** An image service stand-in: answers PATCH, counts the bytes of each PUT, prints its port. */
const SINK = `
const http = require('node:http');
const s = http.createServer((req, res) => {
  let n = 0;
  req.on('data', (c) => { n += c.length; });
  req.on('end', () => { res.writeHead(req.method === 'PUT' ? 204 : 200, { 'X-Bytes': String(n) }); res.end(); });
});
s.listen(0, '127.0.0.1', () => process.stdout.write(String(s.address().port) + '\\n'));
`;

function startSink(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['-e', SINK], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.stdout?.once('data', (d: Buffer) => resolve({ child, url: `http://127.0.0.1:${d.toString().trim()}` }));
  });
}

/** Milliseconds to read `path` to the end into nothing. */
async function readAll(path: string): Promise<number> {
  const t0 = Date.now();
  await pipeline(createReadStream(path), new Writable({ write: (_c, _e, done) => done() }));
  return Date.now() - t0;
}

export async function runSnapshotBench(opts: BenchOptions): Promise<BenchResult> {
  const unavailable = volumesUnavailable();
  if (unavailable) return { name: 'snapshot', rows: [{ scenario: 'snapshot', metric: 'skipped', value: unavailable }] };
  const sizeMiB = opts.quick ? 64 : 512;
  const root = mkdtempSync(join(tmpdir(), 'bench-snap-'));
  const images = join(root, 'images');
  mkdirSync(images);
  const base = join(images, 'random.raw');
  execFileSync('dd', ['if=/dev/urandom', `of=${base}`, 'bs=1M', `count=${sizeMiB}`, 'status=none']);
  const sink = await startSink();
  const env: Record<string, string> = {
    COMPUTE_AGENT__DEFAULT__HOST: 'bench-snap',
    COMPUTE_AGENT__DEFAULT__STATE_PATH: join(root, 'state'),
    COMPUTE_AGENT__DEFAULT__INSTANCES_PATH: join(root, 'i'),
    COMPUTE_AGENT__QEMU__ACCEL: 'tcg',
    COMPUTE_AGENT__QEMU__IMAGES_PATH: images,
  };
  const { config } = loadConfig({ files: [], env, defaultFile: '/nonexistent/compute-agent.conf' });
  const driver = new QemuDriver({ config, logger: silentLogger(), clock: systemClock, exec: new ProcessExec(), fs: new RootedHostFs('/') });
  const glance = new GlanceHttpClient({ auth: new StaticGlanceAuth(sink.url), numRetries: 0, timeoutMs: 60_000 });
  const uuid = randomUUID();
  const spec = { uuid, name: 'bench-snap', flavor: { name: 'tiny', vcpus: 1, memory_mb: 64, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} }, image_ref: 'random.raw', allocations: {} };
  try {
    await driver.init('bench-snap');
    await driver.spawn(spec);
    const baselineMs = await readAll(base);
    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    let peak = rssBefore;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    let bytes = 0;
    let copyMs = 0;
    let uploadMs = 0;
    const t0 = Date.now();
    await driver.snapshot(spec, async (image) => {
      copyMs = Date.now() - t0;
      const t1 = Date.now();
      await glance.updateImage(uuid, [{ op: 'replace', path: '/disk_format', value: image.diskFormat }]);
      await glance.uploadImageData(uuid, image.data, image.bytes);
      uploadMs = Date.now() - t1;
      bytes = image.bytes;
    });
    clearInterval(sampler);
    const s = `snapshot of a running guest, ${sizeMiB} MiB of data, streamed to an image service`;
    const mbps = (ms: number): number => round(bytes / MIB / Math.max(ms / 1000, 0.001));
    return {
      name: 'snapshot',
      rows: [
        { scenario: s, metric: 'image size', value: round(bytes / MIB), unit: 'MiB' },
        { scenario: s, metric: 'disk copy (blockdev-backup)', value: copyMs, unit: 'ms' },
        { scenario: s, metric: 'upload', value: uploadMs, unit: 'ms' },
        { scenario: s, metric: 'upload throughput', value: mbps(uploadMs), unit: 'MiB/s', goal: `>= half of reading the same bytes from disk in this run (${mbps(baselineMs)} MiB/s, ${baselineMs} ms)` },
        { scenario: s, metric: 'agent RSS before / peak', value: `${round(rssBefore / MIB)} / ${round(peak / MIB)}`, unit: 'MiB', goal: 'peak - before < 64 MiB while the image is larger than the RSS' },
      ],
      details: { bytes, copyMs, uploadMs, baselineMs, rssBefore, rssPeak: peak },
    };
  } finally {
    await driver.destroy(spec).catch(() => undefined);
    await driver.cleanupHost('bench-snap');
    sink.child.kill();
    reapQemus(root);
    rmSync(root, { recursive: true, force: true });
  }
}
