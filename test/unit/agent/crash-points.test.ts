import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CRASH_POINTS, CrashPointSpecError, crashPoint, parseCrashAt } from '../../../agent/crash-points';

test('unarmed (no variable in the test environment), passing a point does nothing', () => {
  expect(process.env.COMPUTE_AGENT_CRASH_AT).toBeUndefined();
  for (const name of Object.keys(CRASH_POINTS) as Array<keyof typeof CRASH_POINTS>) crashPoint(name);
});

test('<point>[:<nth>] arms one point; empty is unarmed; anything else is refused', () => {
  expect(parseCrashAt(undefined)).toBeUndefined();
  expect(parseCrashAt('')).toBeUndefined();
  expect(parseCrashAt('build.claimed')).toEqual({ name: 'build.claimed', nth: 1 });
  expect(parseCrashAt('journal.accepted:3')).toEqual({ name: 'journal.accepted', nth: 3 });
  for (const bad of ['no.such.point', 'build.claimed:0', 'build.claimed:x', 'build.claimed:1:2', 'toString']) expect(() => parseCrashAt(bad)).toThrow(CrashPointSpecError);
});

test('every point says where it is and what has happened before it', () => {
  for (const [name, info] of Object.entries(CRASH_POINTS)) {
    expect(name).toMatch(/^[a-z]+(\.[a-z-]+)+$/);
    expect(info.where).toMatch(/^agent\/[a-z/-]+\.ts \w+/);
    expect(info.after.length).toBeGreaterThan(10);
  }
});

test('every point is passed in the file its row names, and only there', () => {
  const root = join(__dirname, '..', '..', '..');
  for (const [name, info] of Object.entries(CRASH_POINTS)) {
    const file = info.where.split(' ')[0] ?? '';
    const text = readFileSync(join(root, file), 'utf8');
    expect(text.split(`crashPoint('${name}')`).length - 1).toBe(1);
  }
});
