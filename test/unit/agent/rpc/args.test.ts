// Argument decoders built from a method table's own decode functions (`arg.from`): the refusal
// names the argument, the expected form and each wrong field below it.
import { arg, decodeArgs, isInvalid, type Invalid } from '../../../../agent/rpc/endpoint/args';
import { InvalidArgumentsError } from '../../../../agent/rpc/oslo/errors';

/** A point with integer coordinates, `{x, y}`; names each wrong coordinate. */
const point = arg.from('a point {x, y}', (v): { x: number; y: number } | Invalid => {
  if (typeof v !== 'object' || v === null) return arg.refuse();
  const { x, y } = v as { x?: unknown; y?: unknown };
  const issues = (['x', 'y'] as const).flatMap((k) => {
    const c = k === 'x' ? x : y;
    if (c === undefined) return [{ path: [k], problem: 'missing' }];
    return Number.isInteger(c) ? [] : [{ path: [k], problem: 'an integer' }];
  });
  return issues.length ? arg.refuse(issues) : { x: x as number, y: y as number };
});

function problems(fn: () => unknown): readonly string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof InvalidArgumentsError) return e.problems;
    throw e;
  }
  throw new Error('not refused');
}

test('a decoded value reaches the handler typed', () => {
  const a = decodeArgs('move', { to: point, by: arg.optional(point, { x: 0, y: 0 }) }, { to: { x: 1, y: 2 } });
  expect(a).toEqual({ to: { x: 1, y: 2 }, by: { x: 0, y: 0 } });
});

test('the refusal names the argument, the expected form and every wrong field below it', () => {
  expect(problems(() => decodeArgs('move', { to: point }, { to: { x: 'one' } }))).toEqual([
    "argument 'to': expected a point {x, y}, got an object (to.x: an integer; to.y: missing)",
  ]);
});

test('a value of the wrong form as a whole is refused without field detail', () => {
  expect(problems(() => decodeArgs('move', { to: point }, { to: 7 }))).toEqual(["argument 'to': expected a point {x, y}, got number 7"]);
});

test('in a list, the wrong item is named by its index', () => {
  expect(problems(() => decodeArgs('path', { via: arg.list(point) }, { via: [{ x: 1, y: 1 }, { x: 1 }] }))).toEqual([
    "argument 'via': expected a list of point {x, y}s, got a list (via.1.y: missing)",
  ]);
});

test('missing, unknown and malformed arguments are reported together, as a TypeError would', () => {
  expect(problems(() => decodeArgs('move', { to: point, speed: arg.int(1, 9) }, { speed: 10, extra: true }))).toEqual([
    "missing required argument 'to' (a point {x, y})",
    "argument 'speed': expected an integer in [1, 9], got number 10",
    "got an unexpected keyword argument 'extra'",
  ]);
});

test('isInvalid tells a refusal from any decoded value', () => {
  expect(isInvalid(point.decode({ x: 1 }))).toBe(true);
  expect(isInvalid(arg.string().decode(3))).toBe(true);
  expect(isInvalid(arg.any().decode({ invalid: true }))).toBe(false);
  expect(isInvalid(point.decode({ x: 1, y: 2 }))).toBe(false);
});
