/**
 * A stand-in agent process for the adoption tests: builds a qemu driver from the environment
 * (COMPUTE_AGENT__* overrides, as the real agent reads them), initialises it, spawns the
 * instances given as JSON in argv[2], prints `READY <pids>` and then idles until it is killed.
 *
 * Run through `runTsChild` (`node scripts/ts-run.js`, which transpiles TypeScript on the fly), so
 * it exercises the source, never a stale build.
 */
import { silentLogger } from '../../lib/logging/logger';
import { systemClock } from '../../lib/clock';
import { loadConfig } from '../../config/loader';
import { ProcessExec } from '../../virt-drivers/host/exec';
import { RootedHostFs } from '../../virt-drivers/host/host-fs';
import { QemuDriver } from '../../virt-drivers/qemu/driver';
import type { InstanceSpec } from '../../virt-drivers/types';

async function main(): Promise<void> {
  const specs = JSON.parse(process.argv[2] ?? '[]') as InstanceSpec[];
  const { config } = loadConfig({ files: [], env: process.env, defaultFile: '/nonexistent/compute-agent.conf' });
  const driver = new QemuDriver({ config, logger: silentLogger(), clock: systemClock, exec: new ProcessExec(), fs: new RootedHostFs('/') });
  await driver.init(config.DEFAULT.host);
  for (const spec of specs) await driver.spawn(spec);
  process.stdout.write(`READY ${specs.map((s) => s.uuid).join(',')}\n`);
  setInterval(() => undefined, 60_000);
}

main().catch((e: unknown) => {
  process.stderr.write(`child failed: ${(e as Error).message}\n`);
  process.exit(1);
});
