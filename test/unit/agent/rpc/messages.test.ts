// Envelope and payload encoding against real oslo.messaging messages.
import { parseJsonArgs } from '../../../../agent/cli/commands/rpc';
import { decodeEnvelope, encodeEnvelope, salvageReplyAddress } from '../../../../agent/rpc/oslo/envelope';
import { BadMessageError, MessageTooLargeError } from '../../../../agent/rpc/oslo/errors';
import { decodeReply, decodeRequest, encodeReply, encodeRequest, newId } from '../../../../agent/rpc/oslo/messages';
import { osloProperties } from '../../../../agent/rpc/oslo/properties';
import { osloFixture, rawBody } from './fixtures';

const MAX = 1 << 20;

describe('decodeRequest on captured oslo messages', () => {
  test('call: method, args, version, reply address, call-monitor timeout and context', () => {
    const f = osloFixture('call');
    const r = decodeRequest(rawBody('call'), MAX);
    expect(r.method).toBe('echo');
    expect(r.args).toEqual({ payload: { hello: 'world', n: 1, nested: { list: [1, 2, 3] } } });
    expect(r.version).toBe('6.0');
    expect(r.namespace).toBeNull();
    expect(r.reply).toEqual({ msgId: f.oslo_message._msg_id, replyQueue: f.oslo_message._reply_q });
    expect(r.callMonitorTimeout).toBeNull();
    expect(r.uniqueId).toBe(f.oslo_message._unique_id);
    expect(r.context.request_id).toBe('req-8c1c3f2e-5b7a-4e69-9a55-1f0c6c1d2e3f');
    expect(r.context.roles).toEqual(['admin', 'member', 'reader']);
    expect(Object.keys(r.context)).toHaveLength(17);
  });

  test('cast and fanout cast carry no reply address', () => {
    for (const name of ['cast', 'fanout-cast']) {
      const r = decodeRequest(rawBody(name), MAX);
      expect(r.reply).toBeUndefined();
      expect(r.method).toBe(osloFixture(name).oslo_message.method);
    }
  });

  test('slow call: _timeout is the call-monitor timeout', () => {
    expect(decodeRequest(rawBody('slow-call'), MAX).callMonitorTimeout).toBe(2);
  });

  test('a bare dict (legacy envelope 1.0) is the payload itself', () => {
    const r = decodeRequest(Buffer.from(JSON.stringify({ method: 'm', args: { a: 1 } })), MAX);
    expect(r).toMatchObject({ method: 'm', args: { a: 1 }, version: '1.0' });
  });
});

describe('encodeRequest reproduces what oslo sends', () => {
  test.each(['call', 'cast', 'slow-call'])('%s: same keys in the same order, same values', (name) => {
    const m = osloFixture(name).oslo_message;
    const context: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(m)) if (k.startsWith('_context_')) context[k.slice(9)] = v;
    const body = encodeRequest({
      method: m.method as string,
      args: m.args as Record<string, unknown>,
      version: m.version as string,
      uniqueId: m._unique_id as string,
      call: m._msg_id ? { msgId: m._msg_id as string, replyQueue: m._reply_q as string, callMonitorTimeout: m._timeout as number | null } : undefined,
      context,
    });
    const outer = JSON.parse(body.toString()) as Record<string, string>;
    expect(Object.keys(outer)).toEqual(['oslo.version', 'oslo.message']);
    expect(outer['oslo.version']).toBe('2.0');
    const inner = JSON.parse(outer['oslo.message'] ?? '') as Record<string, unknown>;
    expect(Object.keys(inner)).toEqual(Object.keys(m));
    expect(inner).toEqual(m);
  });

  test('properties match the captured ones (call adds expiration in ms)', () => {
    const call = osloFixture('call').properties;
    expect(osloProperties(5000)).toEqual({
      contentType: call.content_type,
      contentEncoding: call.content_encoding,
      deliveryMode: call.delivery_mode,
      priority: call.priority,
      headers: call.headers,
      expiration: call.expiration,
    });
    expect(osloProperties().expiration).toBeUndefined();
  });
});

describe('replies', () => {
  test('encodeReply has oslo keys in order, failure present even when null', () => {
    const inner = JSON.parse((JSON.parse(encodeReply({ msgId: 'm1', result: { a: 1 }, failure: null, ending: true }).toString()) as Record<string, string>)['oslo.message'] ?? '') as Record<string, unknown>;
    expect(Object.keys(inner)).toEqual(Object.keys(osloFixture('reply').oslo_message));
    expect(inner).toMatchObject({ result: { a: 1 }, failure: null, ending: true, _msg_id: 'm1' });
    expect(inner._unique_id).toMatch(/^[0-9a-f]{32}$/);
  });

  test.each([
    ['reply', true, false],
    ['heartbeat-reply', false, false],
    ['slow-reply', true, false],
    ['failure-reply', true, true],
    ['failure-reply-nosuchmethod', true, true],
  ])('decodeReply(%s)', (name, ending, failed) => {
    const f = osloFixture(name);
    const r = decodeReply(rawBody(name));
    expect(r.msgId).toBe(f.oslo_message._msg_id);
    expect(r.ending).toBe(ending);
    expect(r.failure !== null).toBe(failed);
    expect(r.result).toEqual(f.oslo_message.result);
  });
});

describe('bad input becomes BadMessageError with a reason', () => {
  const bad = (body: Buffer | string, max = MAX): BadMessageError => {
    try {
      decodeRequest(typeof body === 'string' ? Buffer.from(body) : body, max);
    } catch (e) {
      if (e instanceof BadMessageError || e instanceof MessageTooLargeError) return e as BadMessageError;
      throw e;
    }
    throw new Error('decoded');
  };
  const env = (inner: unknown): string => JSON.stringify({ 'oslo.version': '2.0', 'oslo.message': JSON.stringify(inner) });

  test.each([
    [Buffer.from([0xff, 0xfe, 0x00]), 'not UTF-8'],
    ['{"oslo.version": "2.0", "oslo.mess', 'body is not JSON'],
    ['[1,2]', 'not a JSON object (got an array)'],
    ['null', 'not a JSON object (got null)'],
    ['{"oslo.version":"2.0"}', 'incomplete envelope'],
    ['{"oslo.version":"3.0","oslo.message":"{}"}', 'envelope version "3.0" is not supported'],
    ['{"oslo.version":"2.0","oslo.message":{"method":"m"}}', '"oslo.message" must be a JSON string'],
    ['{"oslo.version":"2.0","oslo.message":"[]"}', 'not a JSON object'],
    [env({ args: {} }), '"method" must be a non-empty string'],
    [env({ method: 'm', args: [1] }), '"args" must be an object of keyword arguments (got an array)'],
    [env({ method: 'm', version: 6 }), '"version" must be a string "X.Y"'],
    [env({ method: 'm', namespace: 1 }), '"namespace" must be a string or null'],
    [env({ method: 'm', _msg_id: 'x' }), '"_msg_id" and "_reply_q" must both be non-empty strings'],
    ['{"x": 1}', '"method" must be a non-empty string'],
  ])('%#: %s', (body, reason) => {
    expect(bad(body).message).toContain(reason);
  });

  test('a call with bad fields still names its reply address', () => {
    const e = bad(env({ method: 'm', args: 'nope', _msg_id: 'abc', _reply_q: 'reply_q1' }));
    expect(e.replyTo).toEqual({ msgId: 'abc', replyQueue: 'reply_q1' });
  });

  test('a truncated call is salvaged for its reply address', () => {
    const raw = osloFixture('call').body_raw;
    const cut = raw.slice(0, raw.indexOf('_context_roles'));
    expect(bad(cut).replyTo).toEqual({ msgId: osloFixture('call').oslo_message._msg_id, replyQueue: osloFixture('call').oslo_message._reply_q });
  });

  test('an oversized body is not parsed; its reply address is still found', () => {
    const e = bad(rawBody('call'), 100) as unknown as MessageTooLargeError;
    expect(e).toBeInstanceOf(MessageTooLargeError);
    expect(e.message).toContain('exceeds the agent\'s limit of 100 bytes');
    expect(e.replyTo?.msgId).toBe(osloFixture('call').oslo_message._msg_id);
  });

  test('salvage ignores keys that are only text inside an argument', () => {
    const text = env({ method: 'm', args: { note: '"_msg_id": "evil", "_reply_q": "reply_evil"' } });
    expect(salvageReplyAddress(text)).toBeUndefined();
  });
});

test('encodeEnvelope / decodeEnvelope round trip', () => {
  const payload = { method: 'x', args: { s: 'ünïcode ✓' }, _unique_id: newId() };
  expect(decodeEnvelope(encodeEnvelope(payload))).toEqual({ payload, legacy: false });
});

test('the rpc command parses json-args as an object of keyword arguments', () => {
  expect(parseJsonArgs(undefined)).toEqual({ args: {} });
  expect(parseJsonArgs('{"a": [1]}')).toEqual({ args: { a: [1] } });
  expect(parseJsonArgs('[1]')).toEqual({ error: expect.stringContaining('must be a JSON object') });
  expect(parseJsonArgs('{x')).toEqual({ error: expect.stringContaining('not valid JSON') });
});
