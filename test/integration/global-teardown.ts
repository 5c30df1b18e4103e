// Takes down the cloud of scripts/cloud when a test file of this run brought it up (the marker
// SharedCloud leaves), after every file that shares it; a cloud found running is left as it was.
import { existsSync, rmSync } from 'node:fs';
import { cloudEnv, runScript } from '../../bench/cloud-api';
import { CLOUD_MARKER } from '../helpers/cloud';

export default async function globalTeardown(): Promise<void> {
  if (process.env.CLOUD_KEEP) return;
  let marker: string;
  try {
    marker = CLOUD_MARKER(cloudEnv().CLOUD_DIR ?? '');
  } catch {
    return;
  }
  if (!existsSync(marker)) return;
  const t0 = Date.now();
  await runScript('cloud', ['down'], 600_000).catch((e: Error) => process.stdout.write(`scripts/cloud down: ${e.message}\n`));
  rmSync(marker, { force: true });
  process.stdout.write(`scripts/cloud down (global teardown): ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
}
