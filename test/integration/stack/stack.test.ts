// The dev stack is real: Placement (8.0.0 on Zed, 13.0.0 on 2025.1) answers with microversion 1.39
// and accepts the noauth2 token, RabbitMQ is the release's (3.10 on Zed, 4.0 on 2025.1) and
// accepts an AMQP connection through the agent's own connection code.
import axios from 'axios';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { loadConfig } from '../../../config/loader';
import { AmqpBroker } from '../../../agent/rpc/amqp/amqp-broker';
import { silentLogger } from '../../../lib/logging/logger';
import { NoAuth } from '../../../tracker/placement/auth';
import { PlacementClient } from '../../../tracker/placement/client';
import { PlacementAuthError } from '../../../tracker/placement/errors';
import { PlacementHttp } from '../../../tracker/placement/http';
import { OPENSTACK_RELEASE, PLACEMENT_URL, TRANSPORT_URL } from '../../helpers/stack';

const STACK = join(__dirname, '..', '..', '..', 'scripts', 'stack');
const RELEASE_PACKAGES = { zed: { placement: '8.', rabbitmq: '3.10.' }, '2025.1': { placement: '13.', rabbitmq: '4.0.' } }[OPENSTACK_RELEASE];

describe('dev stack', () => {
  test(`RabbitMQ and Placement are ${OPENSTACK_RELEASE}'s packages`, () => {
    const env = { ...process.env, OPENSTACK_RELEASE };
    expect(execFileSync('bash', [STACK, 'rabbitmqctl', '-q', 'version'], { env, encoding: 'utf8' }).trim()).toMatch(new RegExp(`^${RELEASE_PACKAGES.rabbitmq.replace(/\./g, '\\.')}`));
    const root = execFileSync('bash', [join(STACK, '..', 'release-root'), 'path', OPENSTACK_RELEASE], { encoding: 'utf8' }).trim();
    const version = execFileSync('chroot', [root, 'dpkg-query', '-W', '-f=${Version}', 'placement-api'], { encoding: 'utf8' });
    expect(version.startsWith(RELEASE_PACKAGES.placement)).toBe(true);
  });

  test('Placement answers GET / with max_version 1.39', async () => {
    const client = new PlacementClient(new PlacementHttp({ auth: new NoAuth(PLACEMENT_URL) }));
    const v = await client.assertUsable();
    expect(v.max).toEqual({ major: 1, minor: 39 });
  });

  test('an authenticated GET /resource_providers works, and a wrong token is refused', async () => {
    const client = new PlacementClient(new PlacementHttp({ auth: new NoAuth(PLACEMENT_URL) }));
    expect(Array.isArray(await client.listProviders())).toBe(true);

    const wrong = {
      token: () => Promise.resolve('not-admin'),
      endpoint: () => Promise.resolve(PLACEMENT_URL),
      invalidate: () => undefined,
    };
    const refused = new PlacementClient(new PlacementHttp({ auth: wrong }));
    await expect(refused.listProviders()).rejects.toBeInstanceOf(PlacementAuthError);
    const noToken = await axios.get(`${PLACEMENT_URL}/resource_providers`, { validateStatus: () => true });
    expect(noToken.status).toBe(401);
  });

  const broker = (url: string, attempts = 5): AmqpBroker => {
    const { config } = loadConfig({ files: [], env: { COMPUTE_AGENT__DEFAULT__TRANSPORT_URL: url }, defaultFile: '/nonexistent' });
    return new AmqpBroker({ transport: config.DEFAULT.transport_url, rabbit: config.oslo_messaging_rabbit, logger: silentLogger(), initialAttempts: attempts });
  };

  test('RabbitMQ accepts an AMQP connection through the agent broker', async () => {
    const b = broker(TRANSPORT_URL);
    await b.start();
    expect(b.isConnected).toBe(true);
    await b.close();
  });

  test('a broker list fails over to the host that answers', async () => {
    const statuses: string[] = [];
    const b = broker(TRANSPORT_URL.replace('rabbit://', 'rabbit://guest:guest@127.0.0.1:1,'));
    b.onStatus((s) => statuses.push(s.type));
    await b.start();
    expect(b.isConnected).toBe(true);
    expect(statuses).toContain('connected');
    await b.close();
  });

  test('wrong broker credentials: a clear reason without the password', async () => {
    const url = TRANSPORT_URL.replace(/\/\/[^@]*@/, '//guest:wrong-pass-xyz@');
    const err = await broker(url, 1).start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).not.toContain('wrong-pass-xyz');
  });
});
