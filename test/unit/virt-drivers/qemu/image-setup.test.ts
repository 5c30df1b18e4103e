import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../../../lib/logging/logger';
import { systemClock } from '../../../../lib/clock';
import { loadConfig } from '../../../../config/loader';
import { FakeExec } from '../../../helpers/fake-exec';
import { CacheManager, buildImages } from '../../../../virt-drivers/qemu/image-setup';
import { ImageCache } from '../../../../virt-drivers/qemu/image-cache';
import { qemuOptionsFromConfig } from '../../../../virt-drivers/qemu/options';
import type { GlanceApi } from '../../../../virt-drivers/glance/api';

const notCalled: GlanceApi = { getImage: () => Promise.reject(new Error('no')), openImageData: () => Promise.reject(new Error('no')) };

function options(env: Record<string, string>) {
  return qemuOptionsFromConfig(loadConfig({ files: [], env, defaultFile: '/nonexistent/compute-agent.conf' }).config);
}

describe('image setup', () => {
  test('no Glance cache without [glance] endpoint_override, keystone auth or a Glance port', () => {
    const deps = { exec: new FakeExec(), clock: systemClock, log: silentLogger() };
    expect(buildImages(options({}), deps).cache).toBeUndefined();
    expect(buildImages(options({ COMPUTE_AGENT__GLANCE__ENDPOINT_OVERRIDE: 'http://127.0.0.1:9292' }), deps).cache).toBeInstanceOf(ImageCache);
    expect(buildImages(options({}), { ...deps, glance: notCalled }).cache?.dir).toBe('/var/lib/compute-agent/instances/_base');
  });

  test('the cache manager prunes on its interval with the images in use, and stops', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cache-manager-'));
    const used = join(dir, '11111111-2222-3333-4444-555555555555.raw');
    const unused = join(dir, '22222222-2222-3333-4444-555555555555.raw');
    writeFileSync(used, 'a');
    writeFileSync(unused, 'b');
    const cache = new ImageCache({ dir, minAgeMs: 0 }, { glance: notCalled, clock: systemClock, logger: silentLogger() });
    let asked = 0;
    const manager = new CacheManager(cache, () => (asked++, new Set([used])), silentLogger());
    manager.start(20);
    const deadline = Date.now() + 2000;
    while (readdirSync(dir).length > 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    manager.stop();
    expect(readdirSync(dir)).toEqual([used.slice(dir.length + 1)]);
    const after = asked;
    await new Promise((r) => setTimeout(r, 80));
    expect(asked).toBe(after);
  });
});
