// The cephx key files of RBD volumes, checked before QEMU starts: each problem is one line naming
// the file and what to do, and never the file's content.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VolumeSecretError } from '../../../../virt-drivers/qemu/errors';
import type { RbdVolumeDefinition } from '../../../../virt-drivers/qemu/instance-files';
import { checkRbdSecrets, checkSecretFile } from '../../../../virt-drivers/qemu/rbd-secrets';
import { qemuOptionsFromConfig } from '../../../../virt-drivers/qemu/options';
import { configFromEnv, configProblems } from '../../../helpers/config';

const KEY = 'AQBwS3hmAAAAABAAf0yR0Uq1Ek5RyqQKrJc0Ww==';
const SECRET = '5b6e1a2c-7f3d-4a8e-9c01-2d3e4f5a6b7c';

describe('qemu volumes: cephx key files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rbd-secrets-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: string, mode = 0o600): string => {
    const path = join(dir, name);
    writeFileSync(path, content, { mode });
    chmodSync(path, mode);
    return path;
  };
  /** The message of the VolumeSecretError checking `path` throws. */
  const problem = async (path: string): Promise<string> => {
    const e = await checkSecretFile('inst-1', path).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(VolumeSecretError);
    expect((e as Error).message).not.toContain(KEY.slice(0, 12));
    return (e as Error).message;
  };

  test('a key as `ceph auth get-key` writes it (base64, no newline), mode 0600, passes; a symlink to one too', async () => {
    const good = file('good.base64', KEY);
    await expect(checkSecretFile('inst-1', good)).resolves.toBeUndefined();
    symlinkSync(good, join(dir, 'link.base64'));
    await expect(checkSecretFile('inst-1', join(dir, 'link.base64'))).resolves.toBeUndefined();
  });

  test('missing: names the file, the option and how to write it', async () => {
    const path = join(dir, 'absent.base64');
    expect(await problem(path)).toBe(`instance inst-1: cephx key file ${path} does not exist ([qemu] rbd_secrets_dir); write it with: (umask 077 && ceph auth get-key client.<rbd_user> > ${path})`);
  });

  test('open to group or others: refused with the mode and the chmod to run', async () => {
    const path = file('open.base64', KEY, 0o640);
    expect(await problem(path)).toBe(`instance inst-1: cephx key file ${path} is open to other users (mode 0640); chmod 600 ${path}`);
    expect(await problem(file('world.base64', KEY, 0o604))).toContain('(mode 0604)');
  });

  test('not a regular file, empty, a trailing newline (QEMU refuses it), not base64: each refused saying so', async () => {
    const sub = join(dir, 'sub.base64');
    mkdirSync(sub, { mode: 0o700 });
    expect(await problem(sub)).toContain('is not a regular file');
    expect(await problem(file('empty.base64', ''))).toContain('is empty; write it with');
    expect(await problem(file('newline.base64', `${KEY}\n`))).toContain('ends with a newline or space, which QEMU refuses');
    expect(await problem(file('keyring.base64', `[client.cinder]\n\tkey = ${KEY}\n`))).toContain('does not hold a base64 key');
    expect(await problem(file('big.base64', 'A'.repeat(8192)))).toContain('too large to be a cephx key');
  });

  test('the volumes\' files are checked once per secret uuid; volumes without cephx need none', async () => {
    const vol = (slot: number, secretUuid: string | null): RbdVolumeDefinition => ({ slot, volumeId: `v${slot}`, pool: 'p', image: 'i', servers: [{ host: 'h', port: '1' }], user: secretUuid && 'cinder', secretUuid, readOnly: false, discard: false, bootIndex: null });
    await expect(checkRbdSecrets('inst-1', join(dir, 'nowhere'), [vol(0, null)])).resolves.toBeUndefined();
    await expect(checkRbdSecrets('inst-1', dir, undefined)).resolves.toBeUndefined();
    file(`${SECRET}.base64`, KEY);
    await expect(checkRbdSecrets('inst-1', dir, [vol(0, SECRET), vol(1, SECRET)])).resolves.toBeUndefined();
    await expect(checkRbdSecrets('inst-1', join(dir, 'nowhere'), [vol(0, SECRET)])).rejects.toThrow(`cephx key file ${join(dir, 'nowhere', `${SECRET}.base64`)} does not exist`);
  });

  test('[qemu] rbd_secrets_dir: /etc/compute-agent/secrets by default, an absolute path', () => {
    expect(qemuOptionsFromConfig(configFromEnv({})).rbdSecretsDir).toBe('/etc/compute-agent/secrets');
    expect(qemuOptionsFromConfig(configFromEnv({ COMPUTE_AGENT__QEMU__RBD_SECRETS_DIR: '/srv/keys/' })).rbdSecretsDir).toBe('/srv/keys');
    expect(configProblems(() => configFromEnv({ COMPUTE_AGENT__QEMU__RBD_SECRETS_DIR: 'keys' }))).toEqual([expect.stringMatching(/^qemu\.rbd_secrets_dir = "keys": not an absolute path/)]);
  });
});
