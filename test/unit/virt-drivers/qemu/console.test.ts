// The qemu driver's console output: the end of the instance's serial log, capped at nova libvirt's
// 100 KiB, empty before the guest wrote anything, InstanceNotFoundError for an unknown instance.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InstanceNotFoundError } from '../../../../virt-drivers/errors';
import type { QemuHost } from '../../../../virt-drivers/qemu/context';
import { consoleOutput, CONSOLE_MAX_BYTES } from '../../../../virt-drivers/qemu/lifecycle';

/** A host whose one active instance keeps its console at `file` (the only part `consoleOutput` reads). */
function hostWith(uuid: string, file: string): QemuHost {
  return { table: { active: new Map([[uuid, { paths: { console: file } }]]) } } as unknown as QemuHost;
}

test('the log as written; past 100 KiB its last 100 KiB; none yet: empty; an unknown instance: not found', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ca-console-'));
  const file = join(dir, 'console.log');
  const host = hostWith('u1', file);
  await expect(consoleOutput(host, { uuid: 'u1', name: 'n' })).resolves.toEqual(Buffer.alloc(0));
  writeFileSync(file, 'boot\nlogin: ');
  await expect(consoleOutput(host, { uuid: 'u1', name: 'n' })).resolves.toEqual(Buffer.from('boot\nlogin: '));
  const big = Buffer.concat([Buffer.alloc(10, 'a'), Buffer.alloc(CONSOLE_MAX_BYTES - 3, 'b'), Buffer.from('end')]);
  writeFileSync(file, big);
  const out = await consoleOutput(host, { uuid: 'u1', name: 'n' });
  expect(out.length).toBe(CONSOLE_MAX_BYTES);
  expect(out.equals(big.subarray(10))).toBe(true);
  await expect(consoleOutput(host, { uuid: 'other', name: 'n' })).rejects.toThrow(InstanceNotFoundError);
});
