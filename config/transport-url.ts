/**
 * oslo.messaging transport URLs: `rabbit://user:pass@host1:5672,user:pass@host2:5672/vhost?k=v`.
 *
 * Parsed here, in config, because validation must reject a bad URL at load time with the field
 * name; the AMQP layer (`agent/rpc/`) only consumes the parsed form. Credentials and the virtual
 * host are percent-decoded, as oslo does, so a password holding `@`, `/`, `,` or `#` must be
 * percent-encoded in the file.
 */
import { z } from 'zod';

export interface BrokerHost {
  readonly host: string;
  readonly port: number;
  readonly username?: string;
  readonly password?: string;
}

export interface TransportUrl {
  readonly scheme: 'rabbit';
  readonly hosts: readonly BrokerHost[];
  /** Decoded virtual host; `/` when the URL has none. */
  readonly virtualHost: string;
  readonly query: Readonly<Record<string, string>>;
}

export const DEFAULT_AMQP_PORT = 5672;

/** Why a URL was refused: a short reason for the config error line. */
export class TransportUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TransportUrlError';
  }
}

function decode(s: string, what: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new TransportUrlError(`${what} has a bad percent-encoding`);
  }
}

function parseHost(entry: string): BrokerHost {
  let creds: string | undefined;
  let hostport = entry;
  const at = entry.lastIndexOf('@');
  if (at >= 0) {
    creds = entry.slice(0, at);
    hostport = entry.slice(at + 1);
  }
  let host: string;
  let portText: string | undefined;
  const v6 = /^\[([0-9A-Fa-f:.]+)\](?::(.*))?$/.exec(hostport);
  if (v6) {
    host = v6[1] ?? '';
    portText = v6[2];
  } else {
    const parts = hostport.split(':');
    if (parts.length > 2) throw new TransportUrlError(`host "${hostport}" is malformed (bracket IPv6 addresses)`);
    host = parts[0] ?? '';
    portText = parts[1];
  }
  if (host === '' || !/^[A-Za-z0-9_.:-]+$/.test(host)) throw new TransportUrlError('a host is missing or malformed');
  let port = DEFAULT_AMQP_PORT;
  if (portText !== undefined && portText !== '') {
    if (!/^\d+$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) {
      throw new TransportUrlError(`port "${portText}" is not in 1-65535`);
    }
    port = Number(portText);
  }
  const out: { host: string; port: number; username?: string; password?: string } = { host, port };
  if (creds !== undefined) {
    const colon = creds.indexOf(':');
    out.username = decode(colon >= 0 ? creds.slice(0, colon) : creds, 'the user name');
    if (colon >= 0) out.password = decode(creds.slice(colon + 1), 'the password');
  }
  return out;
}

/** @throws TransportUrlError naming what is wrong. */
export function parseTransportUrl(raw: string): TransportUrl {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(.*)$/s.exec(raw.trim());
  if (!m) throw new TransportUrlError('not a URL');
  const scheme = (m[1] ?? '').toLowerCase();
  if (scheme !== 'rabbit') throw new TransportUrlError(`scheme "${scheme}" is not supported (only rabbit)`);
  let rest = m[2] ?? '';
  const query: Record<string, string> = {};
  const q = rest.indexOf('?');
  if (q >= 0) {
    for (const [k, v] of new URLSearchParams(rest.slice(q + 1))) query[k] = v;
    rest = rest.slice(0, q);
  }
  if (rest.includes('#')) throw new TransportUrlError('"#" must be percent-encoded (%23)');
  // The host list ends at the first "/" after the last "@" of each entry; credentials may not hold
  // a raw "/", so the first "/" after the final "@" region starts the virtual host.
  const lastAt = rest.lastIndexOf('@');
  const slash = rest.indexOf('/', lastAt + 1);
  const hostList = slash >= 0 ? rest.slice(0, slash) : rest;
  const path = slash >= 0 ? rest.slice(slash + 1) : '';
  if (hostList === '') throw new TransportUrlError('no broker host');
  const hosts = hostList.split(',').map((h) => parseHost(h.trim()));
  const virtualHost = path === '' ? '/' : decode(path, 'the virtual host');
  return { scheme: 'rabbit', hosts, virtualHost, query };
}

/** The URL with every password replaced by `***`, for logs and error lines. */
export function maskTransportUrl(raw: string): string {
  return raw.replace(/(\/\/|,)([^:@/,]*):([^@]*)@/g, '$1$2:***@');
}

/** The zod option type for `transport_url`. */
export const transportUrl = (): z.ZodType<TransportUrl, string> =>
  z.string().transform((raw, ctx) => {
    try {
      return parseTransportUrl(raw);
    } catch (e) {
      ctx.addIssue({ code: 'custom', message: e instanceof Error ? e.message : String(e) });
      return z.NEVER;
    }
  });
