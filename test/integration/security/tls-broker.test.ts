// amqps with a CA, a client certificate and key: a private RabbitMQ node with a TLS listener (a
// test CA made in the test, peer verification on) accepts the agent; with a CA that did not sign
// the broker's certificate, the agent refuses the broker with a clear reason.
import { chmodSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../../lib/logging/logger';
import { AmqpBroker } from '../../../agent/rpc/amqp/amqp-broker';
import { loadConfig } from '../../../config/loader';
import { startPrivateRabbit, type PrivateRabbit } from '../rpc/private-rabbit';
import { makeTestCa } from '../../helpers/test-ca';

jest.setTimeout(180000);

function broker(url: string, ca: string, cert: string, key: string): AmqpBroker {
  const { config } = loadConfig({
    files: [],
    env: {
      COMPUTE_AGENT__DEFAULT__TRANSPORT_URL: url,
      COMPUTE_AGENT__OSLO_MESSAGING_RABBIT__SSL: 'true',
      COMPUTE_AGENT__OSLO_MESSAGING_RABBIT__SSL_CA_FILE: ca,
      COMPUTE_AGENT__OSLO_MESSAGING_RABBIT__SSL_CERT_FILE: cert,
      COMPUTE_AGENT__OSLO_MESSAGING_RABBIT__SSL_KEY_FILE: key,
    },
    defaultFile: '/nonexistent',
  });
  return new AmqpBroker({ transport: config.DEFAULT.transport_url, rabbit: config.oslo_messaging_rabbit, logger: silentLogger(), initialAttempts: 1 });
}

describe('TLS to RabbitMQ', () => {
  const ca = makeTestCa();
  const server = ca.issue('rabbit', 'server');
  const client = ca.issue('agent', 'client');
  // The broker runs as the rabbitmq user: it must be able to read its certificate and key.
  chmodSync(ca.dir, 0o755);
  for (const f of readdirSync(ca.dir)) chmodSync(join(ca.dir, f), 0o644);
  let rabbit: PrivateRabbit;

  beforeAll(async () => {
    rabbit = await startPrivateRabbit({
      extra: ({ tlsPort }) =>
        `listeners.ssl.default = 127.0.0.1:${tlsPort}\nssl_options.cacertfile = ${ca.caFile}\nssl_options.certfile = ${server.cert}\n` +
        `ssl_options.keyfile = ${server.key}\nssl_options.verify = verify_peer\nssl_options.fail_if_no_peer_cert = true\n`,
    });
  });
  afterAll(async () => {
    await rabbit?.stop();
  });

  test('the agent connects over amqps with the right CA and its client certificate', async () => {
    const b = broker(`rabbit://guest:guest@127.0.0.1:${rabbit.tlsPort}/`, ca.caFile, client.cert, client.key);
    await b.start();
    expect(b.isConnected).toBe(true);
    await b.close();
  });

  test('a broker certificate the configured CA did not sign is refused', async () => {
    const other = makeTestCa('not the broker CA');
    const b = broker(`rabbit://guest:guest@127.0.0.1:${rabbit.tlsPort}/`, other.caFile, client.cert, client.key);
    const err = await b.start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/certificate|self[- ]signed|verify/i);
    await b.close().catch(() => undefined);
  });
});
