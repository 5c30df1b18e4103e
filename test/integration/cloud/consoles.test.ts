// A server's consoles through nova's API and nova's own proxies on scripts/cloud (nova 31's
// nova-novncproxy and nova-serialproxy on the machine, two agents whose guests' consoles listen on
// their hosts' management addresses), as a user opens them:
// - VNC: `POST /servers/{id}/remote-consoles` (novnc) gives noVNC's page with a token; the page
//   loads; over the proxy's websocket with that token, the guest's VNC server speaks RFB 3.8 through
//   nova's security proxy and names the guest (the server's name) in ServerInit;
// - serial: the serial proxy's websocket with its token carries what the guest prints (the tick
//   guest's counter);
// - a token made before a live migration opens nothing once the guest runs on the other host (the
//   agent deleted the instance's tokens in nova, as nova-compute does); a new console opens there,
//   the proxy having asked that host whether the port is the guest's (validate_console_port).
//
// The cloud is shared with the other files of test/integration/cloud (test/helpers/cloud.ts).
import WebSocket from 'ws';
import { SharedCloud, type ServerView } from '../../helpers/cloud';
import { neutronUnavailable } from '../../helpers/neutron-cloud';
import { HAVE_QEMU } from '../../helpers/qemu-hosts';
import { tickImage } from '../../helpers/tick-guest';
import { waitUntil } from '../../helpers/wait';

jest.setTimeout(600_000);
const log = (line: string): boolean => process.stdout.write(`cloud-consoles: ${line}\n`);

const unavailable = HAVE_QEMU ? neutronUnavailable() : 'qemu-system-x86_64 / qemu-img not installed';
if (unavailable) log(`skipped: ${unavailable}`);
const suite = unavailable ? describe.skip : describe;

/** A websocket to a console proxy, its binary messages read as one byte stream. */
class ConsoleSocket {
  private buffered = Buffer.alloc(0);
  private waiter: (() => void) | undefined;
  private closed: string | undefined;

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, data]);
      this.waiter?.();
    });
    ws.on('close', (code: number, reason: Buffer) => {
      this.closed = `closed (${code}${reason.length ? ` ${reason.toString()}` : ''})`;
      this.waiter?.();
    });
  }

  /** Opens `url`; rejects when the proxy refuses the upgrade. */
  static open(url: string): Promise<ConsoleSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: 30_000 });
      ws.once('open', () => resolve(new ConsoleSocket(ws)));
      ws.once('error', reject);
    });
  }

  /** The next `n` bytes. @throws when the socket closes or `ms` pass first */
  async read(n: number, ms = 30_000): Promise<Buffer> {
    await this.until(() => this.buffered.length >= n, `${n} bytes`, ms);
    const out = this.buffered.subarray(0, n);
    this.buffered = this.buffered.subarray(n);
    return out;
  }

  /** Everything read until `done` holds for it. */
  async readUntil(done: (text: string) => boolean, ms = 30_000): Promise<string> {
    await this.until(() => done(this.buffered.toString('latin1')), 'the expected text', ms);
    return this.buffered.toString('latin1');
  }

  /** Resolves with how the socket ended once the proxy closes it (or rejects after `ms`). */
  async ended(ms = 30_000): Promise<string> {
    await this.until(() => this.closed !== undefined, 'the proxy to close', ms, true);
    return this.closed ?? '';
  }

  /** Bytes received and not read yet. */
  get pending(): number {
    return this.buffered.length;
  }

  send(bytes: Buffer): void {
    this.ws.send(bytes);
  }

  close(): void {
    this.ws.terminate();
  }

  private async until(cond: () => boolean, what: string, ms: number, closing = false): Promise<void> {
    const deadline = Date.now() + ms;
    while (!cond()) {
      if (this.closed !== undefined && !closing) throw new Error(`waiting for ${what}: ${this.closed}; had ${JSON.stringify(this.buffered.toString('latin1').slice(-120))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} within ${ms} ms; had ${JSON.stringify(this.buffered.toString('latin1').slice(-120))}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.min(left, 500));
        this.waiter = () => {
          clearTimeout(t);
          r();
        };
      });
    }
  }
}

/** The websocket URL noVNC opens for a console URL (the token travels in the page's `path` parameter). */
function novncSocketUrl(pageUrl: string): string {
  const page = new URL(pageUrl);
  const path = page.searchParams.get('path') ?? '';
  return `ws://${page.host}/${path.replace(/^\//, '')}`;
}

/** RFB 3.8 through nova's security proxy (auth_schemes none) up to ServerInit; the desktop's name and size. */
async function rfbSession(socket: ConsoleSocket): Promise<{ name: string; width: number; height: number }> {
  expect((await socket.read(12)).toString('latin1')).toBe('RFB 003.008\n');
  socket.send(Buffer.from('RFB 003.008\n', 'latin1'));
  const count = (await socket.read(1))[0] ?? 0;
  const types = [...(await socket.read(count))];
  expect(types).toContain(1); // None: the proxy has done the server's security already
  socket.send(Buffer.from([1]));
  expect((await socket.read(4)).readUInt32BE(0)).toBe(0); // SecurityResult OK
  socket.send(Buffer.from([1])); // ClientInit, shared
  const init = await socket.read(24);
  const name = (await socket.read(init.readUInt32BE(20))).toString('utf8');
  return { name, width: init.readUInt16BE(0), height: init.readUInt16BE(2) };
}

suite('consoles through nova’s API and nova’s proxies (scripts/cloud)', () => {
  let cloud: SharedCloud;
  let tick = '';
  const servers: string[] = [];

  beforeAll(async () => {
    cloud = await SharedCloud.start(log);
    tick = await cloud.uploadImage(`tick-consoles-${Date.now()}`, tickImage(), 'raw');
  });

  afterAll(async () => {
    for (const id of servers) await cloud?.call('nova', 'DELETE', `/servers/${id}`).catch(() => undefined);
    for (const id of servers) await waitUntil(`server ${id} is gone`, async () => (await cloud.server(id)) === undefined, 120_000).catch(() => undefined);
    if (tick) await cloud?.call('glance', 'DELETE', `/v2/images/${tick}`).catch(() => undefined);
    await cloud?.stop();
  });

  const remoteConsole = (id: string, protocol: string, type: string): Promise<{ url: string; protocol: string; type: string }> =>
    cloud.must('nova', 'POST', `/servers/${id}/remote-consoles`, { remote_console: { protocol, type } }, 'remote_console', '2.6');

  test('noVNC: the page loads, the proxy carries RFB to the guest’s VNC server; serial: the proxy carries what the guest prints; an old token dies with a live migration', async () => {
    const [hostA = '', hostB = ''] = cloud.hosts;
    const s = await cloud.must<{ id: string }>('nova', 'POST', '/servers', { server: { name: 'consoles-tick', flavorRef: 'ca-net', imageRef: tick, networks: 'none', host: hostA } }, 'server', '2.74');
    servers.push(s.id);
    await cloud.settled<ServerView>(s.id, 'ACTIVE');
    // QEMU names its VNC desktop after the guest (`-name`, the server's name): "QEMU (consoles-tick)".
    const desktopName = 'QEMU (consoles-tick)';

    let t0 = Date.now();
    const vnc = await remoteConsole(s.id, 'vnc', 'novnc');
    log(`VNC console URL in ${Date.now() - t0} ms: ${vnc.url.replace(/token%3D[0-9a-f-]+/, 'token%3D…')}`);
    expect(vnc).toMatchObject({ protocol: 'vnc', type: 'novnc' });
    expect(vnc.url).toMatch(/^http:\/\/127\.0\.0\.1:6080\/vnc_lite\.html\?path=%3Ftoken%3D[0-9a-f-]{36}$/);
    const page = await fetch(vnc.url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('noVNC');

    t0 = Date.now();
    const rfb = await ConsoleSocket.open(novncSocketUrl(vnc.url));
    const desktop = await rfbSession(rfb);
    log(`RFB through nova-novncproxy to ServerInit in ${Date.now() - t0} ms: "${desktop.name}" ${desktop.width}x${desktop.height}`);
    expect(desktop.name).toBe(desktopName);
    expect(desktop.width).toBeGreaterThan(0);
    rfb.close();

    const serial = await remoteConsole(s.id, 'serial', 'serial');
    expect(serial.url).toMatch(/^ws:\/\/127\.0\.0\.1:6083\/\?token=[0-9a-f-]{36}$/);
    t0 = Date.now();
    const tty = await ConsoleSocket.open(serial.url);
    const seen = await tty.readUntil((t) => /tick [0-9a-f]{4}\n/.test(t));
    log(`serial through nova-serialproxy: "${/tick [0-9a-f]{4}/.exec(seen)?.[0] ?? ''}" after ${Date.now() - t0} ms`);
    tty.close();

    // The guest moves; its old token names the old host, which no longer has it.
    await cloud.must('nova', 'POST', `/servers/${s.id}/action`, { 'os-migrateLive': { host: hostB, block_migration: 'auto' } }, undefined, '2.74');
    await waitUntil('the live migration ends', async () => (await cloud.server(s.id))?.['OS-EXT-STS:task_state'] === null, 180_000);
    expect(await cloud.settled(s.id, 'ACTIVE', 60_000)).toMatchObject({ 'OS-EXT-SRV-ATTR:host': hostB });
    // nova-compute deleted the instance's tokens when the migration ended: the proxy finds no token.
    const stale = await ConsoleSocket.open(serial.url).catch((e: Error) => e);
    if (stale instanceof ConsoleSocket) {
      // websockify accepts the upgrade; nova's handler then refuses the token and closes, carrying nothing.
      log(`the pre-migration serial token after the move: ${await stale.ended()}`);
      expect(stale.pending).toBe(0);
    } else {
      log(`the pre-migration serial token after the move: refused (${stale.message})`);
    }
    const again = await ConsoleSocket.open((await remoteConsole(s.id, 'serial', 'serial')).url);
    await again.readUntil((t) => /tick [0-9a-f]{4}\n/.test(t));
    again.close();
    const rfbThere = await ConsoleSocket.open(novncSocketUrl((await remoteConsole(s.id, 'vnc', 'novnc')).url));
    expect((await rfbSession(rfbThere)).name).toBe(desktopName);
    rfbThere.close();
  });
});
