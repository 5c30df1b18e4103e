// Dispatcher: oslo's version rules, NoSuchMethod vs UnsupportedVersion, argument binding.
import { arg } from '../../../../agent/rpc/endpoint/args';
import { Dispatcher, RegistrationError, type CallInfo } from '../../../../agent/rpc/endpoint/dispatcher';
import { InvalidArgumentsError, NoSuchMethodError, UnsupportedVersionError } from '../../../../agent/rpc/oslo/errors';
import type { RpcRequest } from '../../../../agent/rpc/oslo/messages';
import { instanceUuid } from './harness';

const req = (method: string, version = '6.0', args: Record<string, unknown> = {}, namespace: string | null = null): RpcRequest => ({
  method,
  args,
  version,
  namespace,
  uniqueId: 'u1',
  reply: undefined,
  callMonitorTimeout: null,
  context: {},
});
const call: CallInfo = { method: 'm', version: '6.0', context: {}, args: {}, uniqueId: 'u', isCall: true, signal: new AbortController().signal };
const instance = (uuid: unknown): Record<string, unknown> => ({
  'nova_object.name': 'Instance',
  'nova_object.namespace': 'nova',
  'nova_object.version': '2.8',
  'nova_object.data': { uuid },
});

function dispatcher(): Dispatcher {
  return new Dispatcher()
    .register({ name: 'ping', versions: { min: '6.0' }, args: {}, handler: async () => 'pong' })
    .register({
      name: 'terminate_instance',
      versions: { min: '6.0', max: '6.2' },
      args: { instance: arg.novaObject('Instance'), bdms: arg.optional(arg.nullable(arg.list(arg.dict())), null) },
      orderingKey: (a) => instanceUuid(a.instance),
      handler: async (a) => ({ uuid: instanceUuid(a.instance), bdms: a.bdms }),
    })
    .register({ name: 'baseping', namespace: 'baseapi', versions: { min: '1.1' }, args: { arg: arg.string() }, handler: async (a) => a.arg });
}

describe('versions', () => {
  const d = dispatcher();
  test('the served version is the highest registered', () => {
    expect(d.servedVersion()).toBe('6.2');
    expect(d.servedVersion('baseapi', 1)).toBe('1.1');
  });
  test.each(['6.0', '6.1', '6.2'])('%s is served', (v) => {
    expect(d.resolve(req('ping', v)).method).toBe('ping');
  });
  test.each([['6.3'], ['7.0'], ['5.13'], ['6.2.1']])('%s gets UnsupportedVersion naming version and method', (v) => {
    expect(() => d.resolve(req('ping', v))).toThrow(new UnsupportedVersionError(v, 'ping'));
  });
  test('a request without version means 1.0 (unsupported here)', () => {
    expect(() => d.resolve(req('ping', '1.0'))).toThrow(UnsupportedVersionError);
  });
  test('namespaces are separate targets', () => {
    expect(() => d.resolve(req('baseping', '6.0'))).toThrow(NoSuchMethodError);
    expect(() => d.resolve(req('ping', '1.1', {}, 'baseapi'))).toThrow(NoSuchMethodError);
    expect(() => d.resolve(req('ping', '6.0', {}, 'nope'))).toThrow(UnsupportedVersionError);
  });
  test('a method narrower than the target refuses versions outside its range', () => {
    const narrow = new Dispatcher()
      .register({ name: 'old', versions: { min: '6.0', max: '6.1' }, args: {}, handler: async () => 1 })
      .register({ name: 'new', versions: { min: '6.3' }, args: {}, handler: async () => 2 });
    expect(() => narrow.resolve(req('old', '6.2'))).toThrow(new UnsupportedVersionError('6.2', 'old'));
    expect(() => narrow.resolve(req('new', '6.2'))).toThrow(UnsupportedVersionError);
    expect(narrow.resolve(req('new', '6.3')).method).toBe('new');
  });
});

test('unknown method within a served version: NoSuchMethod', () => {
  expect(() => dispatcher().resolve(req('build_and_run_instance'))).toThrow(new NoSuchMethodError('build_and_run_instance'));
});

describe('arguments', () => {
  const d = dispatcher();
  test('decoded arguments reach the handler; optional ones get their default', async () => {
    const r = d.resolve(req('terminate_instance', '6.0', { instance: instance('u-1') }));
    expect(r.orderingKey).toBe('u-1');
    expect(r.journaled).toBe(true);
    await expect(r.invoke(call)).resolves.toEqual({ uuid: 'u-1', bdms: null });
  });
  test('every problem is named: missing, wrong form, unexpected', () => {
    let err: unknown;
    try {
      d.resolve(req('terminate_instance', '6.0', { bdms: 'x', extra: 1 }));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidArgumentsError);
    const e = err as InvalidArgumentsError;
    expect(e.problems).toEqual([
      "missing required argument 'instance' (an Instance object primitive)",
      "argument 'bdms': expected a list of objects or null, got the string \"x\"",
      "got an unexpected keyword argument 'extra'",
    ]);
    expect(e.message).toMatch(/^terminate_instance\(\) missing required argument 'instance'/);
  });
  test('a primitive of another class is refused', () => {
    expect(() => d.resolve(req('terminate_instance', '6.0', { instance: { ...instance('x'), 'nova_object.name': 'Flavor' } }))).toThrow(
      "argument 'instance': expected an Instance object primitive, got a Flavor object",
    );
  });
  test.each([
    [arg.int(0, 10), 11, false],
    [arg.int(0, 10), 3, true],
    [arg.uuid(), 'c0ffee00-0000-4000-8000-000000000000', true],
    [arg.uuid(), 'nope', false],
    [arg.bool(), 'true', false],
    [arg.oneOf(['a', 'b'] as const), 'b', true],
    [arg.number(), Number.NaN, false],
    [arg.list(arg.string()), ['a', 1], false],
  ])('decoder %#', (dec, value, ok) => {
    expect(dec.decode(value) === value || (Array.isArray(value) && ok)).toBe(ok);
  });
});

test('registration refuses duplicates, private names and bad versions', () => {
  const d = dispatcher();
  expect(() => d.register({ name: 'ping', versions: { min: '6.0' }, args: {}, handler: async () => 1 })).toThrow(RegistrationError);
  expect(() => d.register({ name: '_private', versions: { min: '6.0' }, args: {}, handler: async () => 1 })).toThrow(RegistrationError);
  expect(() => d.register({ name: 'x', versions: { min: 'six' }, args: {}, handler: async () => 1 })).toThrow(RegistrationError);
  expect(() => d.register({ name: 'y', versions: { min: '6.2', max: '6.1' }, args: {}, handler: async () => 1 })).toThrow(RegistrationError);
});
