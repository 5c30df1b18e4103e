/**
 * The oslo.messaging envelope: an AMQP body `{"oslo.version": "2.0", "oslo.message": "<JSON>"}`
 * whose `oslo.message` string holds the payload (oslo `_drivers/common.py` serialize_msg /
 * deserialize_msg). A bare JSON object without the two keys is the legacy 1.0 form and is the
 * payload itself.
 *
 * Decoding is defensive: every way a body can be wrong (not UTF-8, not JSON, not an object, a
 * partial envelope, an unsupported envelope version) becomes a `BadMessageError` with a short
 * reason, never an exception of another type. Not here: the payload's fields (`messages.ts`).
 */
import { BadMessageError, type ReplyAddress } from './errors';
import { isCompatible, parseVersion, version } from './versions';

export const ENVELOPE_VERSION = '2.0';
const VERSION_KEY = 'oslo.version';
const MESSAGE_KEY = 'oslo.message';
const SERVED_ENVELOPE = version(ENVELOPE_VERSION);

/** Serializes a payload into an enveloped AMQP body. */
export function encodeEnvelope(payload: Readonly<Record<string, unknown>>): Buffer {
  return Buffer.from(JSON.stringify({ [VERSION_KEY]: ENVELOPE_VERSION, [MESSAGE_KEY]: JSON.stringify(payload) }), 'utf8');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function parseObject(text: string, what: string, replyTo?: ReplyAddress): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    const detail = e instanceof Error ? e.message.split('\n')[0] : 'invalid';
    throw new BadMessageError(`${what} is not JSON (${detail})`, replyTo, { cause: e });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new BadMessageError(`${what} is not a JSON object (got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value})`, replyTo);
  }
  return value as Record<string, unknown>;
}

export interface DecodedEnvelope {
  readonly payload: Record<string, unknown>;
  /** True for a bare payload without the 2.0 envelope. */
  readonly legacy: boolean;
}

/**
 * Decodes an AMQP body into its payload object.
 * @throws BadMessageError naming what is wrong; `replyTo` is salvaged from the raw text when the
 *   body still says where a call expects its answer.
 */
export function decodeEnvelope(body: Buffer): DecodedEnvelope {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch (e) {
    throw new BadMessageError('body is not UTF-8 text', undefined, { cause: e });
  }
  let outer: Record<string, unknown>;
  try {
    outer = parseObject(text, 'body');
  } catch (e) {
    if (e instanceof BadMessageError) throw new BadMessageError(e.reason, salvageReplyAddress(text), { cause: e });
    throw e;
  }
  const hasVersion = VERSION_KEY in outer;
  const hasMessage = MESSAGE_KEY in outer;
  if (!hasVersion && !hasMessage) return { payload: outer, legacy: true };
  if (!hasVersion || !hasMessage) {
    throw new BadMessageError(`incomplete envelope: "${hasVersion ? MESSAGE_KEY : VERSION_KEY}" is missing`, salvageReplyAddress(text));
  }
  const v = outer[VERSION_KEY];
  const parsed = typeof v === 'string' ? parseVersion(v) : undefined;
  if (!parsed || !isCompatible(SERVED_ENVELOPE, parsed)) {
    throw new BadMessageError(`envelope version ${JSON.stringify(v)} is not supported (this agent reads ${ENVELOPE_VERSION})`, salvageReplyAddress(text));
  }
  const inner = outer[MESSAGE_KEY];
  if (typeof inner !== 'string') {
    throw new BadMessageError(`"${MESSAGE_KEY}" must be a JSON string (got ${inner === null ? 'null' : typeof inner})`);
  }
  try {
    return { payload: parseObject(inner, `"${MESSAGE_KEY}"`), legacy: false };
  } catch (e) {
    if (e instanceof BadMessageError) throw new BadMessageError(e.reason, salvageReplyAddress(inner), { cause: e });
    throw e;
  }
}

const SCAN_WHOLE = 1 << 20;
const SCAN_EDGE = 256 << 10;
const ESCAPED = (key: string, value: string): RegExp => new RegExp(`(?<!\\\\)\\\\"${key}\\\\":\\s?\\\\"(${value})\\\\"`, 'g');
const PLAIN = (key: string, value: string): RegExp => new RegExp(`(?<!\\\\)"${key}":\\s?"(${value})"`, 'g');
const MSG_ID = '[A-Za-z0-9_-]{1,64}';
const REPLY_Q = '[A-Za-z0-9_.:-]{1,255}';

function lastMatch(text: string, patterns: readonly RegExp[]): string | undefined {
  let found: string | undefined;
  for (const re of patterns) {
    for (const m of text.matchAll(re)) found = m[1];
    if (found !== undefined) return found;
  }
  return found;
}

/**
 * Best effort: finds `_msg_id` and `_reply_q` in text that could not be parsed (truncated, too
 * large), so the caller of a broken call gets a failure instead of a timeout. oslo writes both
 * after `args`, so a large message is scanned at its head and tail only; the last match wins,
 * since top-level keys follow the arguments.
 */
export function salvageReplyAddress(text: string): ReplyAddress | undefined {
  const region = text.length <= SCAN_WHOLE ? text : `${text.slice(0, SCAN_EDGE)}\u0000${text.slice(-SCAN_EDGE)}`;
  const msgId = lastMatch(region, [ESCAPED('_msg_id', MSG_ID), PLAIN('_msg_id', MSG_ID)]);
  const replyQueue = lastMatch(region, [ESCAPED('_reply_q', REPLY_Q), PLAIN('_reply_q', REPLY_Q)]);
  return msgId !== undefined && replyQueue !== undefined ? { msgId, replyQueue } : undefined;
}

/** `salvageReplyAddress` over raw bytes (for bodies too large to decode). */
export function salvageReplyAddressFromBytes(body: Buffer): ReplyAddress | undefined {
  const text =
    body.length <= SCAN_WHOLE
      ? body.toString('latin1')
      : `${body.subarray(0, SCAN_EDGE).toString('latin1')}\u0000${body.subarray(body.length - SCAN_EDGE).toString('latin1')}`;
  return salvageReplyAddress(text);
}
