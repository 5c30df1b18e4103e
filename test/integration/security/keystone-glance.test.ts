// Glance behind a real Keystone: Debian's glance-api with keystonemiddleware (scripts/glance-stack
// GLANCE_AUTH=keystone) and Debian's Keystone (scripts/keystone-stack) on private ports, the
// Placement behind the same Keystone. An agent with compute_driver = qemu authenticates with its
// own credentials (a password, then an application credential), finds Glance in the catalog and
// boots a real VM from the image; Glance refuses the same request without a token, and a build
// by an agent whose credentials Keystone refuses fails with one line naming the options to check.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Daemon } from '../../../agent/daemon';
import { loadConfig } from '../../../config/loader';
import { systemClock } from '../../../lib/clock';
import { silentLogger } from '../../../lib/logging/logger';
import { glanceAuthFromConfig, placementFromConfig } from '../../../tracker/placement/factory';
import { ProcessExec } from '../../../virt-drivers/host/exec';
import { qemuOptionsFromConfig } from '../../../virt-drivers/qemu/options';
import { buildImages } from '../../../virt-drivers/qemu/image-setup';
import { agentSpec, rootOf, startDaemon, type AgentSpec } from '../../helpers/agents';
import { ControlPlane } from '../../helpers/control-plane';
import { freeGlancePort, PrivateGlance } from '../../helpers/glance';
import { ADMIN_PASSWORD, CountingFront, PrivateKeystone, SERVICE_PASSWORD } from '../../helpers/keystone';
import { deleteTree } from '../../helpers/placement';
import { describeWithQemu, reapLeftovers } from '../../helpers/qemu-hosts';
import { lastTick, tickImage } from '../../helpers/tick-guest';
import { waitUntil } from '../../helpers/wait';

jest.setTimeout(300000);
const FLAVOR = { name: 'tiny', vcpus: 1, memory_mb: 32, root_gb: 1, ephemeral_gb: 0, swap: 0, extra_specs: {} };

describeWithQemu('Glance behind keystonemiddleware: the agent fetches images with its own token', () => {
  const exchange = `test-ksg-${randomUUID().slice(0, 8)}`;
  const cp = new ControlPlane(exchange);
  let ks: PrivateKeystone;
  let front: CountingFront;
  let glance: PrivateGlance;
  let image: string;
  const agents: Array<{ spec: AgentSpec; daemon: Daemon }> = [];

  beforeAll(async () => {
    const glancePort = await freeGlancePort();
    ks = await PrivateKeystone.create(3600, glancePort);
    await ks.up();
    front = await new CountingFront(ks.port).start();
    const k = ks;
    glance = await PrivateGlance.start({ port: glancePort, keystone: { url: k.url, servicePassword: SERVICE_PASSWORD, token: () => k.passwordToken('admin', ADMIN_PASSWORD, 'admin') } });
    image = await glance.upload('tick', tickImage(), 'raw');
    await cp.start();
  });

  afterAll(async () => {
    for (const { spec, daemon } of agents) {
      await daemon.stop('test end');
      reapLeftovers(spec.dir);
      const config = loadConfig({ files: [spec.file], env: {} }).config;
      if (existsSync(join(spec.dir, 'state', 'compute_id'))) await deleteTree(placementFromConfig(config), rootOf(spec)).catch(() => undefined);
    }
    await cp.close();
    await glance?.stop();
    await front?.close();
    await ks?.down();
  });

  /** A qemu agent whose [placement] section is `auth`; Placement and Glance come from the catalog. */
  async function qemuAgent(name: string, auth: string): Promise<AgentSpec> {
    const spec = agentSpec(`${name}-${exchange.slice(-8)}`, exchange);
    const instances = join(spec.dir, 'instances');
    mkdirSync(instances);
    const conf = readFileSync(spec.file, 'utf8')
      .replace(/^compute_driver = .*\n/m, '')
      .replace('[DEFAULT]\n', `[DEFAULT]\ncompute_driver = qemu\ninstances_path = ${instances}\n`)
      .replace(/^\[placement\]\nendpoint_override = .*\n/m, `[placement]\n${auth}`)
      .concat(`[qemu]\naccel = tcg\nshutdown_timeout = 1\ndestroy_timeout = 5\n[glance]\nnum_retries = 0\n`);
    writeFileSync(spec.file, conf, { mode: 0o600 });
    return spec;
  }

  /** Builds one instance of the image on `spec`'s agent; resolves once its guest counts. */
  async function bootOn(spec: AgentSpec): Promise<void> {
    const daemon = await startDaemon(spec);
    agents.push({ spec, daemon });
    const uuid = randomUUID();
    await cp.cast(spec.host, 'build_and_run_instance', { instance: { uuid, display_name: 'ks-glance', project_id: 'p', user_id: 'u', flavor: FLAVOR, image_ref: image } });
    await cp.waitFor('instance.create.end', [uuid], 120000);
    await waitUntil(`the guest of ${uuid} counts`, () => Promise.resolve((lastTick(join(spec.dir, 'instances', uuid, 'console.log')) ?? -1) >= 1), 60000);
    expect(readFileSync(join(spec.dir, 'instances', '_base', `${image}.raw`))).toEqual(tickImage());
    await cp.cast(spec.host, 'terminate_instance', { instance: { uuid } });
    await cp.waitFor('instance.delete.end', [uuid], 60000);
  }

  const withAuth = (config: ReturnType<typeof loadConfig>['config']): { glanceAuth?: NonNullable<ReturnType<typeof glanceAuthFromConfig>> } => {
    const auth = glanceAuthFromConfig(config);
    return auth ? { glanceAuth: auth } : {};
  };

  const password = (user: string, pw: string): string =>
    `auth_type = password\nauth_url = ${front.url}/v3\nusername = ${user}\npassword = ${pw}\nproject_name = service\n`;

  test('Glance answers a request without a token with 401', async () => {
    const res = await fetch(`${glance.url}/v2/images/${image}/file`);
    expect(res.status).toBe(401);
    expect((await glance.image(image)).status).toBe('active');
  });

  test('password: the agent boots a VM from the image, Glance found in the catalog, one download with its own token', async () => {
    const tokensBefore = front.tokenRequests().length;
    await bootOn(await qemuAgent('ksg-pw', password('nova', SERVICE_PASSWORD)));
    expect(glance.dataGets(image)).toBe(1);
    // The agent's own credentials: one token for its Placement client and one for its Glance
    // client (each keeps its own), each reused for every request after.
    const tokens = front.tokenRequests().slice(tokensBefore);
    expect(tokens.map((t) => t.status)).toEqual([201, 201]);
  });

  test('application credential: the same, with a credential the agent user made for itself', async () => {
    const user = `ksg-ac-${randomUUID().slice(0, 8)}`;
    const pw = `pw-${randomUUID()}`;
    const userId = await ks.createServiceUser(user, pw);
    const cred = await ks.createApplicationCredential(userId, user, pw, `agent-${randomUUID().slice(0, 8)}`);
    const auth = `auth_type = v3applicationcredential\nauth_url = ${front.url}/v3\napplication_credential_id = ${cred.id}\napplication_credential_secret = ${cred.secret}\n`;
    await bootOn(await qemuAgent('ksg-ac', auth));
    expect(glance.dataGets(image)).toBe(2);
  });

  test('credentials Keystone refuses: the image download fails with one line naming Keystone and the options to check', async () => {
    const spec = await qemuAgent('ksg-bad', password('nova', 'not-the-password'));
    const config = loadConfig({ files: [spec.file], env: {} }).config;
    const { cache } = buildImages(qemuOptionsFromConfig(config), { exec: new ProcessExec(), clock: systemClock, log: silentLogger(), ...withAuth(config) });
    const e = await cache?.fetch(image).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(Error);
    const message = (e as Error).message;
    expect(message.split('\n')).toHaveLength(1);
    expect(message).toMatch(new RegExp(`^image "${image}": .*keystone ${front.url}/v3/auth/tokens: authentication refused, answered 401`));
    expect(message).toMatch(/check \[placement\] username, password/);
    expect(message).not.toContain('not-the-password');
    expect(glance.dataGets(image)).toBe(2);
  });
});
