/**
 * A throwaway certificate authority for TLS tests, made with the openssl CLI in a temp dir: a CA,
 * and server (or client) certificates for 127.0.0.1/localhost signed by it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCa {
  readonly dir: string;
  readonly caFile: string;
  /** Issues a certificate; returns the cert and key file paths. */
  issue(name: string, usage: 'server' | 'client'): { cert: string; key: string };
}

const ssl = (dir: string, args: string[]): void => {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
};

export function makeTestCa(label = 'compute-agent test CA'): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'ca-tls-'));
  ssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', `/CN=${label}`, '-keyout', 'ca.key', '-out', 'ca.pem']);
  return {
    dir,
    caFile: join(dir, 'ca.pem'),
    issue(name, usage) {
      const ext = join(dir, `${name}.ext`);
      writeFileSync(
        ext,
        usage === 'server'
          ? 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n'
          : 'extendedKeyUsage=clientAuth\n',
      );
      ssl(dir, ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.csr`]);
      ssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', ext, '-out', `${name}.pem`]);
      return { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
    },
  };
}

export function read(path: string): Buffer {
  return readFileSync(path);
}
