// Failures as oslo serializes them: dispatcher errors match the captured ones field for field.
import { BadMessageError, InvalidArgumentsError, NoSuchMethodError, NovaError, RemoteError, UnsupportedVersionError } from '../../../../agent/rpc/oslo/errors';
import { AGENT_MODULE, decodeFailure, encodeFailure, failureFromError } from '../../../../agent/rpc/oslo/failure';
import { osloFixture } from './fixtures';

const captured = (name: string): Record<string, unknown> => osloFixture(name).failure_decoded ?? {};

test('NoSuchMethod: class, module, message and args as oslo sends them', () => {
  const f = failureFromError(new NoSuchMethodError('does_not_exist'));
  const c = captured('failure-reply-nosuchmethod');
  expect({ class: f.className, module: f.module, message: f.message, args: f.args, kwargs: f.kwargs }).toEqual({
    class: c.class,
    module: c.module,
    message: c.message,
    args: c.args,
    kwargs: c.kwargs,
  });
  expect(f.tb.at(-1)).toBe((c.tb as string[]).at(-1));
});

test('UnsupportedVersion: same as oslo', () => {
  const f = failureFromError(new UnsupportedVersionError('6.99', 'echo'));
  const c = captured('failure-reply-unsupportedversion');
  expect([f.className, f.module, f.message, f.args]).toEqual([c.class, c.module, c.message, c.args]);
  expect(f.tb.at(-1)).toBe((c.tb as string[]).at(-1));
});

test('NovaError: module nova.exception, args [message], kwargs with code', () => {
  const f = failureFromError(new NovaError('InstanceNotFound', 'Instance abc could not be found.', { instance_id: 'abc' }, 404));
  expect(f).toMatchObject({
    className: 'InstanceNotFound',
    module: 'nova.exception',
    message: 'Instance abc could not be found.',
    args: ['Instance abc could not be found.'],
    kwargs: { instance_id: 'abc', code: 404 },
  });
});

test('argument and message errors travel as builtins the caller rebuilds', () => {
  expect(failureFromError(new InvalidArgumentsError('m', ["missing required argument 'x' (a string)"]))).toMatchObject({
    className: 'TypeError',
    module: 'builtins',
    message: "m() missing required argument 'x' (a string)",
  });
  expect(failureFromError(new BadMessageError('body is not JSON'))).toMatchObject({ className: 'ValueError', module: 'builtins' });
});

test('anything else goes under compute_agent, message kept, stack as tb', () => {
  const f = failureFromError(new RangeError('disk on fire'));
  expect(f).toMatchObject({ className: 'RangeError', module: AGENT_MODULE, message: 'disk on fire', args: ['disk on fire'], kwargs: {} });
  expect(f.tb[0]).toContain('Traceback');
  expect(f.tb.at(-1)).toBe('RangeError: disk on fire\n');
  expect(failureFromError('a string')).toMatchObject({ className: 'Error', message: 'a string' });
});

test('encodeFailure writes oslo key order; decodeFailure reads captured failures', () => {
  const text = encodeFailure(failureFromError(new NoSuchMethodError('x')));
  expect(Object.keys(JSON.parse(text) as object)).toEqual(['class', 'module', 'message', 'tb', 'args', 'kwargs']);
  const custom = decodeFailure(osloFixture('failure-reply-custom').oslo_message.failure as string);
  expect(custom).toMatchObject({ className: 'HarnessError', module: '__main__', message: 'custom failure', kwargs: { code: 42 } });
});

test('decodeFailure strips _Remote suffixes and tolerates junk', () => {
  expect(decodeFailure(JSON.stringify({ class: 'ValueError_Remote', module: 'builtins_Remote', message: 'm' }))).toMatchObject({ className: 'ValueError', module: 'builtins', tb: [], args: [] });
  expect(decodeFailure('not json')).toBeUndefined();
  expect(decodeFailure('[1]')).toBeUndefined();
});

test('RemoteError keeps every field the callee sent', () => {
  const f = decodeFailure(osloFixture('failure-reply').oslo_message.failure as string);
  if (!f) throw new Error('fixture');
  const e = new RemoteError(f);
  expect(e.message).toBe('builtins.ValueError: boom from harness');
  expect([e.className, e.module, e.remoteMessage, e.args]).toEqual(['ValueError', 'builtins', 'boom from harness', ['boom from harness']]);
});
