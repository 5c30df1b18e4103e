// The guest-agent client against a fake qemu-ga on a unix socket that speaks its protocol: the
// 0xFF reset, guest-sync-delimited answered after a 0xFF sentinel, one JSON object per line. It
// must skip a stale reply left in the channel, pass the password base64-encoded, surface the
// agent's refusal with its class and words, and give up clearly when nothing answers or there is
// no channel at all.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freezeFilesystems, guestAgentCall, GuestAgentCommandError, GuestAgentUnavailableError, setUserPassword } from '../../../../virt-drivers/qemu/guest-agent';

type Reply = (cmd: { execute: string; arguments?: Record<string, unknown> }, sock: Socket) => void;

let dir = '';
let server: Server | undefined;
const received: Array<{ execute: string; arguments?: Record<string, unknown> }> = [];
let resets = 0;
const open = new Set<Socket>();
const track = (s: Server): Server => s.on('connection', (c: Socket) => void open.add(c.on('close', () => open.delete(c))));

/** A fake qemu-ga on `sock`: the sync as qemu-ga answers it, every other command through `reply`; `stale` is written first, as if an earlier client had left it. */
async function agent(reply: Reply, stale?: Buffer): Promise<string> {
  const path = join(dir, 'qga.sock');
  server = track(createServer((sock) => {
    if (stale) sock.write(stale);
    let buf = '';
    sock.on('data', (chunk: Buffer) => {
      for (const b of chunk) if (b === 0xff) resets++;
      buf += chunk.toString('latin1').replace(/\xff/g, '');
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const cmd = JSON.parse(buf.slice(0, nl)) as { execute: string; arguments?: Record<string, unknown> };
        buf = buf.slice(nl + 1);
        received.push(cmd);
        if (cmd.execute === 'guest-sync-delimited') sock.write(Buffer.concat([Buffer.from([0xff]), Buffer.from(`${JSON.stringify({ return: cmd.arguments?.id })}\n`)]));
        else reply(cmd, sock);
      }
    });
  }));
  await new Promise<void>((r) => server!.listen(path, r));
  return path;
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'qga-'));
  received.length = 0;
  resets = 0;
});
afterEach(async () => {
  for (const c of open) c.destroy();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
  rmSync(dir, { recursive: true, force: true });
});

test('set a password: the parser reset, the sync, then guest-set-user-password with the password base64-encoded, not crypted', async () => {
  const path = await agent((_cmd, sock) => sock.write('{"return": {}}\n'));
  await setUserPassword('i-1', path, 'root', 'sécret pass', 2000);
  expect(resets).toBe(1);
  expect(received.map((c) => c.execute)).toEqual(['guest-sync-delimited', 'guest-set-user-password']);
  expect(received[1]?.arguments).toEqual({ username: 'root', password: Buffer.from('sécret pass').toString('base64'), crypted: false });
});

test('a stale reply an earlier client left in the channel is skipped: the command gets its own answer', async () => {
  // An old reply, an old sync's sentinel and reply, and half a reply cut off by our sync's sentinel.
  const stale = Buffer.concat([Buffer.from('{"return": 7}\n'), Buffer.from([0xff]), Buffer.from('{"return": 12345}\n{"return": {"partial"')]);
  const path = await agent((_cmd, sock) => sock.write('{"return": 2}\n'), stale);
  expect(await freezeFilesystems('i-1', path, 2000)).toBe(2);
});

test("the agent's refusal: GuestAgentCommandError with its class and words", async () => {
  const path = await agent((_cmd, sock) => sock.write('{"error": {"class": "GenericError", "desc": "chpasswd exited with 1"}}\n'));
  const err = await guestAgentCall('i-1', path, 'guest-set-user-password', { username: 'root', password: '', crypted: false }, 2000).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(GuestAgentCommandError);
  expect(err).toMatchObject({ errorClass: 'GenericError', desc: 'chpasswd exited with 1', command: 'guest-set-user-password' });
});

test('a channel nobody answers on (no qemu-ga in the guest): GuestAgentUnavailableError after the deadline', async () => {
  const path = join(dir, 'qga.sock');
  server = track(createServer(() => undefined));
  await new Promise<void>((r) => server!.listen(path, r));
  const t0 = Date.now();
  const err = await guestAgentCall('i-1', path, 'guest-ping', undefined, 300).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(GuestAgentUnavailableError);
  expect((err as Error).message).toMatch(/no answer to guest-sync-delimited within 300 ms/);
  expect(Date.now() - t0).toBeLessThan(2000);
});

test('no channel at all: GuestAgentUnavailableError naming the socket', async () => {
  const err = await guestAgentCall('i-1', join(dir, 'missing.sock'), 'guest-ping', undefined, 2000).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(GuestAgentUnavailableError);
  expect((err as Error).message).toMatch(/cannot open its channel .*missing\.sock \(ENOENT\)/);
});
