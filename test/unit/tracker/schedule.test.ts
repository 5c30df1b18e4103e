// The audit schedule: an interval as a cron expression, offset per host.
import cron from 'node-cron';
import { cronFor, auditInterval, ScheduleError } from '../../../tracker/schedule';

describe('audit schedule', () => {
  test('0 means 60 s; negative disables', () => {
    expect(auditInterval(0)).toBe(60);
    expect(auditInterval(-1)).toBeUndefined();
    expect(auditInterval(300)).toBe(300);
  });

  test.each([10, 30, 60, 120, 300, 600, 3600, 7200, 86400])('every %i s is a valid cron step, offset per host', (s) => {
    const a = cronFor(s, 'compute-1');
    expect(cron.validate(a)).toBe(true);
    const task = cron.createTask(a, () => undefined);
    const runs = task.getNextRuns(3).map((d) => d.getTime());
    void task.destroy();
    expect((runs[1] ?? 0) - (runs[0] ?? 0)).toBe(s * 1000);
    expect((runs[2] ?? 0) - (runs[1] ?? 0)).toBe(s * 1000);
  });

  test('hosts get different offsets, so a fleet does not audit in the same second', () => {
    const offsets = new Set(Array.from({ length: 50 }, (_, i) => cronFor(60, `compute-${i}`)));
    expect(offsets.size).toBeGreaterThan(30);
  });

  test('an interval cron cannot step evenly is refused with a hint', () => {
    expect(() => cronFor(90, 'h')).toThrow(ScheduleError);
    expect(() => cronFor(90, 'h')).toThrow(/e\.g\. 30, 60, 120/);
  });
});
