/**
 * `npm run demo:qemu`: the qemu virt driver on this machine, without Placement or RabbitMQ. Two
 * drivers in one process play host-a and host-b (each with its own instances_path under a temp
 * directory); a real VM running the tick guest (a boot sector counting on its serial port) is
 * spawned on host-a and live-migrated to host-b, in the order the compute manager calls the
 * steps; the serial logs show the count going on across the move. Everything is removed at the
 * end. `COMPUTE_AGENT__QEMU__ACCEL` picks the accelerator (default auto).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../lib/logging/logger';
import { systemClock } from '../lib/clock';
import { loadConfig } from '../config/loader';
import { ProcessExec } from '../virt-drivers/host/exec';
import { RootedHostFs } from '../virt-drivers/host/host-fs';
import { QemuDriver } from '../virt-drivers/qemu/driver';
import type { HostRef, InstanceSpec } from '../virt-drivers/types';
import { ticks, writeTickImage } from '../test/helpers/tick-guest';

const root = mkdtempSync(join(tmpdir(), 'qemu-demo-'));
const images = join(root, 'images');

function host(name: string): { driver: QemuDriver; ref: HostRef; instances: string } {
  const env = {
    COMPUTE_AGENT__DEFAULT__HOST: name,
    COMPUTE_AGENT__DEFAULT__STATE_PATH: join(root, name),
    COMPUTE_AGENT__QEMU__IMAGES_PATH: images,
    COMPUTE_AGENT__QEMU__ACCEL: process.env.COMPUTE_AGENT__QEMU__ACCEL ?? 'auto',
  };
  const { config } = loadConfig({ files: [], env, defaultFile: '/nonexistent/compute-agent.conf' });
  const driver = new QemuDriver({ config, logger: silentLogger(), clock: systemClock, exec: new ProcessExec(), fs: new RootedHostFs('/') });
  return { driver, ref: { host: name, nodename: name, address: '127.0.0.1' }, instances: config.DEFAULT.instances_path };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const serial = (instances: string, uuid: string): string => {
  try {
    return readFileSync(join(instances, uuid, 'console.log'), 'utf8');
  } catch {
    return '';
  }
};
const show = (text: string): string => ticks(text).map((t) => `tick ${t.toString(16).padStart(4, '0')}`).join(', ') || '(nothing yet)';

async function main(): Promise<void> {
  mkdirSync(images);
  writeTickImage(join(images, 'tick.img'));
  const a = host('host-a');
  const b = host('host-b');
  await a.driver.init('host-a');
  await b.driver.init('host-b');
  const facts = a.driver.hostFacts();
  console.log(`qemu-demo: QEMU ${facts.version.text}, accelerator ${facts.accel.accel} (${facts.accel.reason})`);

  const uuid = randomUUID();
  const spec: InstanceSpec = {
    uuid,
    name: 'demo-tick',
    flavor: { name: 'tiny', vcpus: 1, memory_mb: 32, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} },
    image_ref: 'tick.img',
    allocations: {},
  };
  let t = Date.now();
  await a.driver.spawn(spec);
  console.log(`host-a: spawned ${uuid} in ${Date.now() - t} ms: ${JSON.stringify(await a.driver.getInfo(spec))}`);
  await sleep(3200);
  console.log(`host-a serial: ${show(serial(a.instances, uuid))}`);

  t = Date.now();
  const d1 = await b.driver.checkCanLiveMigrateDestination(spec, a.ref);
  const d2 = await a.driver.checkCanLiveMigrateSource(spec, d1);
  const d3 = await b.driver.preLiveMigration(spec, d2);
  const prepared = Date.now() - t;
  t = Date.now();
  await a.driver.liveMigration(spec, b.ref, d3);
  const moved = Date.now() - t;
  await a.driver.postLiveMigration(spec, d3);
  await b.driver.postLiveMigrationAtDestination(spec, d3);
  console.log(`live migration host-a -> host-b (${String(d3.migrate_uri)}, disk over NBD port ${String(d3.nbd_port)}): prepared in ${prepared} ms, moved in ${moved} ms`);
  console.log(`host-a: instances now ${JSON.stringify(await a.driver.listInstances())}`);
  console.log(`host-b: ${JSON.stringify(await b.driver.getInfo(spec))}`);
  await sleep(2200);
  console.log(`host-b serial: ${show(serial(b.instances, uuid))}  <- the count goes on: the CPU state moved`);

  await b.driver.destroy(spec);
  await a.driver.cleanupHost('host-a');
  await b.driver.cleanupHost('host-b');
  console.log('qemu-demo: instance destroyed, done');
}

main()
  .catch((e: unknown) => {
    console.error(`qemu-demo: ${(e as Error).message}`);
    process.exitCode = 1;
  })
  .finally(() => rmSync(root, { recursive: true, force: true }));
