import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { QmpClosedError, QmpCommandError, QmpConnectError, QmpProtocolError, QmpTimeoutError } from '../../../../virt-drivers/qemu/errors';
import { QmpClient, type QmpEvent } from '../../../../virt-drivers/qemu/qmp';
import { FakeQmpServer, type FakeQmpCommand } from '../../../helpers/fake-qmp';

describe('QMP client', () => {
  let dir: string;
  let path: string;
  const servers: FakeQmpServer[] = [];
  const clients: QmpClient[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'qmp-'));
    path = join(dir, 'qmp.sock');
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    for (const s of servers.splice(0)) await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function serve(opts: ConstructorParameters<typeof FakeQmpServer>[1] = {}): Promise<FakeQmpServer> {
    const s = new FakeQmpServer(path, opts);
    servers.push(s);
    await s.listen();
    return s;
  }
  async function connect(timeoutMs = 2000, extra: { commandTimeoutMs?: number } = {}): Promise<QmpClient> {
    const c = await QmpClient.connect(path, { timeoutMs, ...extra });
    clients.push(c);
    return c;
  }

  test('retries while the socket is still appearing, reads a greeting sent in pieces, negotiates capabilities', async () => {
    const pending = connect();
    await new Promise((r) => setTimeout(r, 120));
    const server = await serve({ greetingPieces: 4 });
    const client = await pending;
    expect(client.version).toEqual({ major: 7, minor: 2, micro: 22, package: 'fake' });
    expect(server.received.map((c) => c.execute)).toEqual(['qmp_capabilities']);
  });

  test('matches replies by id, whatever their order', async () => {
    const server = await serve();
    const held: FakeQmpCommand[] = [];
    server.handler = (cmd) => {
      held.push(cmd);
      return undefined;
    };
    const client = await connect();
    const a = client.execute('query-status');
    const b = client.execute('query-migrate', { detail: true });
    await new Promise((r) => setTimeout(r, 30));
    expect(held.map((c) => c.execute)).toEqual(['query-status', 'query-migrate']);
    expect(held[1]?.arguments).toEqual({ detail: true });
    server.reply(held[1] as FakeQmpCommand, { return: { status: 'active' } });
    server.reply(held[0] as FakeQmpCommand, { return: { status: 'running', running: true } });
    await expect(a).resolves.toEqual({ status: 'running', running: true });
    await expect(b).resolves.toEqual({ status: 'active' });
  });

  test('an error answer is a QmpCommandError with its class and desc', async () => {
    const server = await serve();
    server.handler = () => ({ error: { class: 'DeviceNotFound', desc: "Device 'x' not found" } });
    const client = await connect();
    const e = await client.execute('block-job-cancel', { device: 'x' }).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(QmpCommandError);
    expect(e).toMatchObject({ command: 'block-job-cancel', errorClass: 'DeviceNotFound', desc: "Device 'x' not found" });
  });

  test('delivers events with their data and time; waitEvent resolves on a match', async () => {
    const server = await serve();
    const client = await connect();
    const seen: QmpEvent[] = [];
    const off = client.onEvent((e) => seen.push(e));
    const waited = client.waitEvent('MIGRATION', { timeoutMs: 1000, match: (e) => e.data.status === 'completed' });
    server.event('STOP');
    server.event('MIGRATION', { status: 'active' });
    server.event('MIGRATION', { status: 'completed' });
    await expect(waited).resolves.toEqual({ event: 'MIGRATION', data: { status: 'completed' }, time: 1700000000.5 });
    off();
    server.event('RESUME');
    await new Promise((r) => setTimeout(r, 20));
    expect(seen.map((e) => e.event)).toEqual(['STOP', 'MIGRATION', 'MIGRATION']);
    expect(seen[0]?.data).toEqual({});
  });

  test('a command without an answer times out; a late answer is dropped and the connection keeps working', async () => {
    const server = await serve();
    const held: FakeQmpCommand[] = [];
    server.handler = (cmd) => {
      if (cmd.execute === 'slow') {
        held.push(cmd);
        return undefined;
      }
      return { return: { ok: true } };
    };
    const client = await connect(2000, { commandTimeoutMs: 50 });
    await expect(client.execute('slow')).rejects.toThrow(QmpTimeoutError);
    server.reply(held[0] as FakeQmpCommand, { return: 'late' });
    await expect(client.execute('fast')).resolves.toEqual({ ok: true });
  });

  test('everything pending is rejected when the socket closes, and later commands too', async () => {
    const server = await serve();
    server.handler = () => undefined;
    const client = await connect();
    const a = client.execute('quit');
    const b = client.waitEvent('SHUTDOWN', { timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 20));
    server.dropClients();
    await expect(a).rejects.toThrow(QmpClosedError);
    await expect(b).rejects.toThrow(QmpClosedError);
    await client.closed;
    expect(client.isClosed).toBe(true);
    await expect(client.execute('query-status')).rejects.toThrow(QmpClosedError);
  });

  test('a monitor that never greets (another client holds it) fails the connect at the deadline', async () => {
    await serve({ silent: true });
    const e = await connect(150).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(QmpConnectError);
    expect((e as Error).message).toMatch(/no greeting/);
  });

  test('a socket that never appears fails the connect at the deadline', async () => {
    await expect(connect(100)).rejects.toThrow(/cannot connect: the socket did not appear within 100 ms/);
  });

  test('events sent before the greeting (a client connected during start-up) are skipped', async () => {
    const server = await serve({ eventsBeforeGreeting: ['RESUME'], greetingPieces: 3 });
    const client = await connect();
    expect(client.version.major).toBe(7);
    expect(server.received.map((c) => c.execute)).toEqual(['qmp_capabilities']);
  });

  test('a peer that is not QEMU is a protocol error', async () => {
    await serve({ greeting: 'SSH-2.0-OpenSSH\r\n' });
    await expect(connect()).rejects.toThrow(QmpProtocolError);
  });

  test('an aborted connect stops retrying', async () => {
    const ac = new AbortController();
    const pending = QmpClient.connect(path, { timeoutMs: 5000, signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    await expect(pending).rejects.toThrow(/aborted/);
  });
});
