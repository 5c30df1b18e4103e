/**
 * The payloads inside the envelope: requests (cast and call) and replies, as oslo.messaging's AMQP
 * driver writes them (`rpc/client.py` _make_message, `_drivers/amqpdriver.py` _send and
 * _send_reply), with keys in the same order.
 *
 * Request: `method`, `args` (keyword arguments), optional `namespace`, `version`; calls add
 * `_msg_id`, `_reply_q`, `_timeout` (call-monitor seconds or null); always `_unique_id` and one
 * `_context_<key>` per context entry. Reply: `result`, `failure` (null or a JSON string; the key
 * must be present), `ending`, `_msg_id`, `_unique_id`.
 *
 * Not here: what the method does with its arguments (`../endpoint/dispatcher.ts`).
 */
import { randomUUID } from 'node:crypto';
import { decodeEnvelope, encodeEnvelope, salvageReplyAddressFromBytes } from './envelope';
import { BadMessageError, MessageTooLargeError, type ReplyAddress } from './errors';
import { parseVersion } from './versions';

/** A flat request context (`RequestContext.to_dict()` in oslo.context and nova). */
export type RpcContext = Readonly<Record<string, unknown>>;

/** A decoded request. */
export interface RpcRequest {
  readonly method: string;
  readonly args: Readonly<Record<string, unknown>>;
  /** "1.0" when the sender gave none, as oslo assumes. */
  readonly version: string;
  readonly namespace: string | null;
  /** The sender's `_unique_id`; absent from very old senders. */
  readonly uniqueId: string | undefined;
  /** Set for calls: where the answer goes. */
  readonly reply: ReplyAddress | undefined;
  /** `_timeout`: the caller's call-monitor timeout in seconds; non-null asks for heartbeats. */
  readonly callMonitorTimeout: number | null;
  readonly context: RpcContext;
}

const CONTEXT_PREFIX = '_context_';

/** A new uuid4 in the hex form oslo uses for `_unique_id` and `_msg_id`. */
export function newId(): string {
  return randomUUID().replace(/-/g, '');
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(JSON.stringify(v)).slice(0, 40)}`;
}

/**
 * Decodes an AMQP body into a request.
 * @throws MessageTooLargeError when `body` exceeds `maxBytes` (it is not parsed).
 * @throws BadMessageError for anything malformed; `replyTo` is set whenever the body still names
 *   a reply queue, so the caller of a broken call hears about it.
 */
export function decodeRequest(body: Buffer, maxBytes: number): RpcRequest {
  if (body.length > maxBytes) throw new MessageTooLargeError(body.length, maxBytes, salvageReplyAddressFromBytes(body));
  const { payload: p } = decodeEnvelope(body);
  const msgId = p._msg_id;
  const replyQ = p._reply_q;
  const reply = typeof msgId === 'string' && typeof replyQ === 'string' && msgId !== '' && replyQ !== '' ? { msgId, replyQueue: replyQ } : undefined;
  const bad = (reason: string): BadMessageError => new BadMessageError(reason, reply);

  if (msgId !== undefined && msgId !== null && !reply) throw bad('"_msg_id" and "_reply_q" must both be non-empty strings in a call');
  const method = p.method;
  if (typeof method !== 'string' || method === '') throw bad(`"method" must be a non-empty string (got ${describe(method)})`);
  const args = p.args === undefined ? {} : p.args;
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw bad(`"args" must be an object of keyword arguments (got ${describe(args)})`);
  }
  const ver = p.version === undefined ? '1.0' : p.version;
  if (typeof ver !== 'string' || !parseVersion(ver)) throw bad(`"version" must be a string "X.Y" (got ${describe(ver)})`);
  const ns = p.namespace === undefined ? null : p.namespace;
  if (ns !== null && typeof ns !== 'string') throw bad(`"namespace" must be a string or null (got ${describe(ns)})`);
  const uid = p._unique_id;
  if (uid !== undefined && typeof uid !== 'string') throw bad(`"_unique_id" must be a string (got ${describe(uid)})`);
  const t = p._timeout;
  const callMonitorTimeout = typeof t === 'number' && Number.isFinite(t) && t > 0 ? t : null;

  const context: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p)) if (k.startsWith(CONTEXT_PREFIX)) context[k.slice(CONTEXT_PREFIX.length)] = v;
  return { method, args: args as Record<string, unknown>, version: ver, namespace: ns, uniqueId: uid, reply, callMonitorTimeout, context };
}

/** What a sender puts in a request. */
export interface OutgoingRequest {
  readonly method: string;
  readonly args: Readonly<Record<string, unknown>>;
  readonly version?: string;
  readonly namespace?: string | null;
  readonly uniqueId: string;
  /** Calls only. */
  readonly call?: { readonly msgId: string; readonly replyQueue: string; readonly callMonitorTimeout: number | null };
  readonly context: RpcContext;
}

/** The request payload in oslo's key order, enveloped. */
export function encodeRequest(r: OutgoingRequest): Buffer {
  const p: Record<string, unknown> = { method: r.method, args: r.args };
  if (r.namespace !== undefined && r.namespace !== null) p.namespace = r.namespace;
  if (r.version !== undefined) p.version = r.version;
  if (r.call) {
    p._msg_id = r.call.msgId;
    p._reply_q = r.call.replyQueue;
    p._timeout = r.call.callMonitorTimeout;
  }
  p._unique_id = r.uniqueId;
  for (const [k, v] of Object.entries(r.context)) p[`${CONTEXT_PREFIX}${k}`] = v;
  return encodeEnvelope(p);
}

/** A reply as it travels. */
export interface RpcReply {
  readonly msgId: string;
  readonly result: unknown;
  /** The failure JSON string, or null. */
  readonly failure: string | null;
  /** False for call-monitor heartbeats (and the legacy first half of a two-part reply). */
  readonly ending: boolean;
  readonly uniqueId: string | undefined;
}

/** A reply payload in oslo's key order, enveloped; a fresh `_unique_id` unless given. */
export function encodeReply(r: Omit<RpcReply, 'uniqueId'> & { uniqueId?: string }): Buffer {
  return encodeEnvelope({ result: r.result, failure: r.failure, ending: r.ending, _msg_id: r.msgId, _unique_id: r.uniqueId ?? newId() });
}

/**
 * Decodes a reply leniently, as oslo's ReplyWaiter does (`ending` defaults to false).
 * @throws BadMessageError when it is not an enveloped object with a string `_msg_id`.
 */
export function decodeReply(body: Buffer): RpcReply {
  const { payload: p } = decodeEnvelope(body);
  if (typeof p._msg_id !== 'string') throw new BadMessageError('reply has no "_msg_id"');
  const failure = typeof p.failure === 'string' && p.failure !== '' ? p.failure : null;
  return {
    msgId: p._msg_id,
    result: p.result === undefined ? null : p.result,
    failure,
    ending: p.ending === true,
    uniqueId: typeof p._unique_id === 'string' ? p._unique_id : undefined,
  };
}
