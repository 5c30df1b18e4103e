/**
 * The host's cephx key files for RBD volumes, checked before QEMU is started with them.
 *
 * QEMU reads `[qemu] rbd_secrets_dir/<secret_uuid>.base64` itself (a `secret` object with
 * `format=base64`), so a bad file would only show as an obscure QEMU or librados failure, or a
 * key readable by every user of the host. Each file needed must therefore be a regular file (a
 * symlink to one is followed), with no permission bits for group or others (as ssh insists on
 * for private keys), readable by the agent (QEMU runs as its user), and hold one base64 key with
 * no newline (QEMU's base64 decoder refuses whitespace). The content is read only to check its
 * form; it goes into no message and no log.
 *
 * It is: the check. It is not: provisioning keys (the deployer writes them, as it defines libvirt
 * secrets for nova).
 */
import { constants } from 'node:fs';
import { access, readFile, stat } from 'node:fs/promises';
import { VolumeSecretError } from './errors';
import type { RbdVolumeDefinition } from './instance-files';
import { neededSecrets, rbdSecretFile } from './volumes';

/** A cephx key is 28 bytes in base64 (40 characters); anything far larger is not one. */
const MAX_KEY_BYTES = 4096;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** What the operator runs to make the file right. */
function howToWrite(file: string): string {
  return `write it with: (umask 077 && ceph auth get-key client.<rbd_user> > ${file})`;
}

/** Checks one key file. @throws VolumeSecretError naming the file and what to do */
export async function checkSecretFile(instance: string, file: string): Promise<void> {
  const fail = (problem: string, cause?: unknown): VolumeSecretError => new VolumeSecretError(instance, file, problem, cause === undefined ? undefined : { cause });
  let st;
  try {
    st = await stat(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw fail(`does not exist ([qemu] rbd_secrets_dir); ${howToWrite(file)}`, e);
    throw fail(`cannot be examined (${code ?? (e as Error).message}); check [qemu] rbd_secrets_dir and its permissions`, e);
  }
  if (!st.isFile()) throw fail('is not a regular file; it must hold the cephx key in base64');
  if ((st.mode & 0o077) !== 0) throw fail(`is open to other users (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}); chmod 600 ${file}`);
  if (st.size === 0 || st.size > MAX_KEY_BYTES) throw fail(`is ${st.size === 0 ? 'empty' : 'too large to be a cephx key'}; ${howToWrite(file)}`);
  try {
    await access(file, constants.R_OK);
  } catch (e) {
    throw fail(`is not readable by the agent's user, as whom QEMU runs; chown it to that user (mode 0600)`, e);
  }
  let text: string;
  try {
    text = await readFile(file, 'latin1');
  } catch (e) {
    throw fail(`cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'})`, e);
  }
  if (/\s$/.test(text) && BASE64.test(text.trimEnd())) throw fail(`ends with a newline or space, which QEMU refuses; ${howToWrite(file)} (it writes none)`);
  if (!BASE64.test(text)) throw fail(`does not hold a base64 key; ${howToWrite(file)}`);
}

/** Checks every key file the volumes need, in order. @throws VolumeSecretError for the first bad one */
export async function checkRbdSecrets(instance: string, dir: string, volumes: readonly RbdVolumeDefinition[] | undefined): Promise<void> {
  for (const uuid of neededSecrets(volumes)) await checkSecretFile(instance, rbdSecretFile(dir, uuid));
}
