// get_host_uptime's default provider: procps-ng's uptime line from /proc, no process spawned.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { countUtmpUsers, formatUptime, procUptimeProvider } from '../../../../agent/compute/adapters/host-uptime';

const at = new Date(2026, 10, 22, 0, 53, 0);

test.each([
  [1893.32, 0, ' 00:53:00 up 31 min,  0 user,  load average: 2.46, 2.13, 1.24\n'],
  [3600 * 5 + 7 * 60, 1, ' 00:53:00 up  5:07,  1 user,  load average: 2.46, 2.13, 1.24\n'],
  [86400 + 60, 2, ' 00:53:00 up 1 day, 1 min,  2 users,  load average: 2.46, 2.13, 1.24\n'],
  [86400 * 3 + 3600 * 14 + 60 * 2, 12, ' 00:53:00 up 3 days, 14:02, 12 users,  load average: 2.46, 2.13, 1.24\n'],
])('%s s, %s users', (seconds, users, text) => {
  expect(formatUptime(seconds, [2.46, 2.13, 1.24], users, at)).toBe(text);
});

test('utmp: counts USER_PROCESS records with a user name', () => {
  const rec = (type: number, user: string): Buffer => {
    const b = Buffer.alloc(384);
    b.writeInt16LE(type, 0);
    b.write(user, 44);
    return b;
  };
  expect(countUtmpUsers(Buffer.concat([rec(7, 'root'), rec(8, 'gone'), rec(7, ''), rec(7, 'op'), Buffer.alloc(10)]))).toBe(2);
});

test('provider reads a /proc tree; utmp is optional', async () => {
  const root = mkdtempSync(join(tmpdir(), 'ca-proc-'));
  try {
    mkdirSync(join(root, 'proc'));
    writeFileSync(join(root, 'proc', 'uptime'), '1893.32 2662.08\n');
    writeFileSync(join(root, 'proc', 'loadavg'), '2.46 2.13 1.24 2/203 20828\n');
    await expect(procUptimeProvider(root, () => at)()).resolves.toBe(' 00:53:00 up 31 min,  0 user,  load average: 2.46, 2.13, 1.24\n');
    writeFileSync(join(root, 'proc', 'loadavg'), 'garbage');
    await expect(procUptimeProvider(root, () => at)()).rejects.toThrow('unexpected');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the real /proc gives a line in the same shape', async () => {
  await expect(procUptimeProvider()()).resolves.toMatch(/^ \d\d:\d\d:\d\d up .+,\s+\d+ users?,  load average: \d+\.\d\d, \d+\.\d\d, \d+\.\d\d\n$/);
});
