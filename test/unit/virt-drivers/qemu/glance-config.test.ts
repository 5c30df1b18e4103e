import { qemuOptionsFromConfig } from '../../../../virt-drivers/qemu/options';
import { configFromEnv, configProblems } from '../../../helpers/config';

const load = configFromEnv;
const problems = (env: Record<string, string>): string[] => configProblems(() => load(env));

describe('[glance] and [image_cache] options', () => {
  test("defaults: nova's: _base under instances_path, a pass every 2400 s, unused images kept a day; no Glance endpoint", () => {
    const o = qemuOptionsFromConfig(load({ COMPUTE_AGENT__DEFAULT__INSTANCES_PATH: '/srv/instances' }));
    expect(o.imageCache).toEqual({ dir: '/srv/instances/_base', intervalMs: 2_400_000, minAgeMs: 86_400_000 });
    expect(o.glance).toEqual({ numRetries: 3, timeoutMs: 60_000 });
  });

  test('manager_interval 0 is every 60 s; -1 or remove_unused_base_images = false never runs it', () => {
    const at = (env: Record<string, string>): number | null => qemuOptionsFromConfig(load(env)).imageCache.intervalMs;
    expect(at({ COMPUTE_AGENT__IMAGE_CACHE__MANAGER_INTERVAL: '0' })).toBe(60_000);
    expect(at({ COMPUTE_AGENT__IMAGE_CACHE__MANAGER_INTERVAL: '-1' })).toBeNull();
    expect(at({ COMPUTE_AGENT__IMAGE_CACHE__REMOVE_UNUSED_BASE_IMAGES: 'false' })).toBeNull();
    expect(qemuOptionsFromConfig(load({ COMPUTE_AGENT__GLANCE__ENDPOINT_OVERRIDE: 'http://127.0.0.1:9292/' })).glance.endpointOverride).toBe('http://127.0.0.1:9292');
  });

  test('bad values name the option and the expected form', () => {
    expect(problems({ COMPUTE_AGENT__IMAGE_CACHE__SUBDIRECTORY_NAME: '../etc' }).join('\n')).toMatch(/image_cache\.subdirectory_name = "\.\.\/etc": not a plain directory name; expected a directory name/);
    expect(problems({ COMPUTE_AGENT__IMAGE_CACHE__MANAGER_INTERVAL: '-2' }).join('\n')).toMatch(/image_cache\.manager_interval = "-2": must be >= -1/);
    expect(problems({ COMPUTE_AGENT__GLANCE__ENDPOINT_OVERRIDE: 'ftp://x' }).join('\n')).toMatch(/glance\.endpoint_override = "ftp:\/\/x": scheme must be http or https/);
  });
});
