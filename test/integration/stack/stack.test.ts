// The dev stack is real: Placement 8.0.0 answers with microversion 1.39 and accepts the noauth2
// token, and RabbitMQ accepts an AMQP connection through the agent's own connection code.
import axios from 'axios';
import { parseTransportUrl } from '../../../config/transport-url';
import { connectFirst } from '../../../agent/rpc/connection';
import { NoAuth } from '../../../tracker/placement/auth';
import { PlacementClient } from '../../../tracker/placement/client';
import { PlacementAuthError } from '../../../tracker/placement/errors';
import { PlacementHttp } from '../../../tracker/placement/http';
import { PLACEMENT_URL, TRANSPORT_URL } from '../../helpers/stack';

const rabbitDefaults = {
  heartbeat_timeout_threshold: 60,
  ssl: false,
  ssl_ca_file: undefined,
  ssl_cert_file: undefined,
  ssl_key_file: undefined,
  rabbit_quorum_queue: false,
  amqp_durable_queues: false,
  amqp_auto_delete: false,
};

describe('dev stack', () => {
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

  test('RabbitMQ accepts an AMQP connection and opens a channel', async () => {
    const conn = await connectFirst(parseTransportUrl(TRANSPORT_URL), rabbitDefaults);
    try {
      const ch = await conn.model.createChannel();
      const q = await ch.assertQueue('', { exclusive: true });
      expect(q.queue).toMatch(/^amq\.gen-/);
      await ch.close();
    } finally {
      await conn.model.close();
    }
  });

  test('a broker list fails over to the host that answers', async () => {
    const url = TRANSPORT_URL.replace('rabbit://', 'rabbit://guest:guest@127.0.0.1:1,');
    const conn = await connectFirst(parseTransportUrl(url), rabbitDefaults);
    expect(conn.label).not.toBe('127.0.0.1:1');
    await conn.model.close();
  });

  test('wrong broker credentials: a clear reason without the password', async () => {
    const url = TRANSPORT_URL.replace(/\/\/[^@]*@/, '//guest:wrong-pass-xyz@');
    const err = await connectFirst(parseTransportUrl(url), rabbitDefaults).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/no broker accepted a connection/);
    expect((err as Error).message).not.toContain('wrong-pass-xyz');
  });
});
