// `compute-agent rpc call|cast` against an agent RPC server on the shared broker.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, type CliIo } from '../../../agent/cli/program';
import { arg } from '../../../agent/rpc/endpoint/args';
import { hostMethods } from '../../../agent/compute/adapters/host-methods';
import { registerMethods } from '../../../agent/compute/register';
import { Dispatcher } from '../../../agent/rpc/endpoint/dispatcher';
import { NovaError } from '../../../agent/rpc/oslo/errors';
import { agentStack, cleanupBroker, TRANSPORT_URL, unique, type AgentStack } from './helpers';

jest.setTimeout(120_000);

const exchange = unique('test-cli');
const topic = unique('compute-cli');
const host = unique('agent');
const dir = mkdtempSync(join(tmpdir(), 'ca-cli-rpc-'));
const conf = join(dir, 'agent.conf');
const casts: unknown[] = [];
let agent: AgentStack | undefined;

function io(): CliIo & { out: (l: string) => void; lines: string[]; errs: string[] } {
  const lines: string[] = [];
  const errs: string[] = [];
  return { lines, errs, out: (l) => lines.push(l), err: (l) => errs.push(l), env: {}, stopSignal: () => new Promise(() => undefined) };
}
const cli = async (...args: string[]): Promise<{ code: number; out: string; err: string }> => {
  const t = io();
  const code = await runCli(['--config-file', conf, 'rpc', ...args], t);
  return { code, out: t.lines.join('\n'), err: t.errs.join('\n') };
};

beforeAll(async () => {
  writeFileSync(conf, `[DEFAULT]\nhost = cli-test\nstate_path = ${dir}\ntransport_url = ${TRANSPORT_URL}\ncontrol_exchange = ${exchange}\nrpc_response_timeout = 5\n`);
  const dispatcher = registerMethods(new Dispatcher(), hostMethods({ hostUptime: async () => ' 12:00:00 up 1 day\n' }))
    .register({ name: 'note', versions: { min: '6.0' }, args: { text: arg.string() }, handler: async (a) => void casts.push(a.text) })
    .register({
      name: 'lookup',
      versions: { min: '6.0' },
      args: { uuid: arg.string() },
      handler: async (a) => {
        throw new NovaError('InstanceNotFound', `Instance ${a.uuid} could not be found.`, { instance_id: a.uuid }, 404);
      },
    });
  agent = await agentStack({ url: TRANSPORT_URL, exchange, topic, server: host, dispatcher });
});

afterAll(async () => {
  await agent?.stop();
  await cleanupBroker(TRANSPORT_URL, { queues: [topic, `${topic}.${host}`], exchanges: [exchange, `${topic}_fanout`] });
  rmSync(dir, { recursive: true, force: true });
});

test('call prints the JSON result and exits 0', async () => {
  await expect(cli('call', '--topic', topic, host, 'get_host_uptime')).resolves.toEqual({ code: 0, out: '" 12:00:00 up 1 day\\n"', err: '' });
});

test('a remote failure prints class, module and message, exit 1, no traceback', async () => {
  const r = await cli('call', '--topic', topic, host, 'lookup', '{"uuid": "abc"}');
  expect(r).toEqual({ code: 1, out: '', err: 'remote error: nova.exception.InstanceNotFound: Instance abc could not be found.' });
  expect((await cli('call', '--topic', topic, host, 'lookup', '{"uuid": 1}')).err).toBe("remote error: builtins.TypeError: lookup() argument 'uuid': expected a string, got number 1");
});

test('cast exits 0 once confirmed, and the agent runs it', async () => {
  expect(await cli('cast', '--topic', topic, host, 'note', '{"text": "hi"}')).toMatchObject({ code: 0, err: '' });
  const deadline = Date.now() + 10_000;
  while (casts.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect(casts).toEqual(['hi']);
});

test('bad arguments exit 2 before anything is sent; no answer exits 1', async () => {
  expect(await cli('call', host, 'm', '{nope')).toMatchObject({ code: 2, err: expect.stringContaining('json-args: not valid JSON') });
  expect(await cli('call', host, 'm', '"text"')).toMatchObject({ code: 2, err: expect.stringContaining('must be a JSON object') });
  expect(await cli('call', '--api-version', 'six', host, 'm')).toMatchObject({ code: 2 });
  expect(await cli('call', '--topic', topic, '--timeout', '1', 'nobody-home', 'get_host_uptime')).toEqual({
    code: 1,
    out: '',
    err: `no reply from ${topic}.nobody-home within 1 s (get_host_uptime)`,
  });
});
