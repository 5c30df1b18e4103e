/**
 * Hostile AMQP bodies for the RPC server: random bytes, truncated real messages, wrong types in
 * every field, huge strings. Deterministic for a given seed. Used by the RPC fuzz tests and by the
 * hostile-input bench (`hostile-input.ts`); not a generator of valid requests.
 */
import { encodeEnvelope } from '../agent/rpc/oslo/envelope';
import { encodeRequest } from '../agent/rpc/oslo/messages';

/** mulberry32: a small seeded PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface FuzzOptions {
  /** Reply queue fuzzed calls name (must exist, or replies are retried until abandoned). */
  readonly replyQueue: string;
  /** Methods the server knows, so some messages get past the method check. */
  readonly methods: readonly string[];
  /** Upper bound for "huge" strings. */
  readonly hugeBytes: number;
}

export function fuzzBodies(count: number, seed: number, o: FuzzOptions): Buffer[] {
  const r = prng(seed);
  const int = (n: number): number => Math.floor(r() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;
  const weird = (): unknown =>
    pick<() => unknown>([
      () => null,
      () => int(1 << 30) - (1 << 29),
      () => r() * 1e308,
      () => true,
      () => [1, 'two', { three: 3 }],
      () => ({ nested: { deep: [null] } }),
      () => 'x'.repeat(int(64)),
      () => '\u0000\ud800 bad surrogate',
      () => ({ 'nova_object.name': 'Instance', 'nova_object.data': 'not an object' }),
    ])();
  const valid = (): Record<string, unknown> => ({
    method: pick(o.methods),
    args: { n: int(10) },
    version: '6.0',
    _unique_id: `${seed}-${int(1e9)}`,
    ...(r() < 0.5 ? { _msg_id: `m${int(1e9)}`, _reply_q: o.replyQueue, _timeout: null } : {}),
    _context_request_id: 'req-fuzz',
  });
  const out: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const kind = int(7);
    if (kind === 0) {
      const b = Buffer.alloc(int(512));
      for (let j = 0; j < b.length; j++) b[j] = int(256);
      out.push(b);
    } else if (kind === 1) {
      const full = encodeRequest({ method: pick(o.methods), args: { n: 1 }, version: '6.0', uniqueId: `t${i}`, call: { msgId: `m${i}`, replyQueue: o.replyQueue, callMonitorTimeout: null }, context: {} });
      out.push(full.subarray(0, int(full.length)));
    } else if (kind === 2) {
      const p = valid();
      const keys = ['method', 'args', 'version', 'namespace', '_unique_id', '_msg_id', '_reply_q', '_timeout', '_context_roles'];
      for (let k = 0; k <= int(3); k++) p[pick(keys)] = weird();
      out.push(encodeEnvelope(p));
    } else if (kind === 3) {
      const p = valid();
      if (r() < 0.5) p.method = 'm'.repeat(int(o.hugeBytes));
      else p.args = { n: 'a'.repeat(int(o.hugeBytes)) };
      out.push(encodeEnvelope(p));
    } else if (kind === 4) {
      out.push(Buffer.from(JSON.stringify(weird())));
    } else if (kind === 5) {
      out.push(Buffer.from(JSON.stringify({ 'oslo.version': pick(['2.0', '1.0', '3.0', 2, null]), 'oslo.message': pick([JSON.stringify(valid()), '{', 7, null]) })));
    } else {
      const p = valid();
      p.args = { n: weird(), extra: weird() };
      out.push(encodeEnvelope(p));
    }
  }
  return out;
}

/**
 * `count` malformed bodies of exactly `bytes` bytes each (at least 1 KiB): a known method with one
 * huge string argument, a call to an unknown method with a huge name, a call cut short, or random
 * bytes.
 */
export function hugeBodies(count: number, seed: number, bytes: number, o: Omit<FuzzOptions, 'hugeBytes'>): Buffer[] {
  const r = prng(seed);
  const int = (n: number): number => Math.floor(r() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;
  /** An enveloped request whose one string field is padded so the body is `bytes` long. */
  const padded = (build: (pad: string) => Record<string, unknown>): Buffer => {
    const bare = encodeEnvelope(build('')).length;
    // Each pad character is one byte in the inner JSON and one in the outer (no escaping).
    return encodeEnvelope(build('a'.repeat(Math.max(0, bytes - bare))));
  };
  const out: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const id = `${seed}-${i}`;
    const kind = int(4);
    if (kind === 0) out.push(padded((pad) => ({ method: pick(o.methods), args: { n: pad }, version: '6.0', _unique_id: id })));
    else if (kind === 1) out.push(padded((pad) => ({ method: `m${pad}`, args: {}, version: '6.0', _msg_id: `m${id}`, _reply_q: o.replyQueue, _timeout: null, _unique_id: id })));
    else if (kind === 2) {
      const call = { method: pick(o.methods), args: { n: 'a'.repeat(bytes) }, version: '6.0', _msg_id: `m${id}`, _reply_q: o.replyQueue, _timeout: null, _unique_id: id };
      out.push(encodeEnvelope(call).subarray(0, bytes));
    } else {
      const b = Buffer.alloc(bytes);
      for (let j = 0; j < b.length; j++) b[j] = int(256);
      out.push(b);
    }
  }
  return out;
}
