/**
 * Named crash points: places in the journal, the RPC server and the compute flows where a test can
 * make the process die as SIGKILL would, to prove that a crash at that moment loses nothing.
 *
 * Armed only through `COMPUTE_AGENT_CRASH_AT=<point>[:<nth>]` (the nth time the point is passed,
 * 1 when omitted), read once when this module loads. Unarmed, `crashPoint` is one comparison of a
 * module constant: nothing measurable on production paths. Armed, passing the point sends SIGKILL
 * to the process itself: no `finally`, no flush, no graceful anything.
 *
 * `CRASH_POINTS` is the one list of points: where each is and what has happened before it. The
 * crash-point integration test iterates over it and keys its scenarios by `CrashPointName`, so a
 * point added here fails to compile there until a scenario covers it.
 *
 * Not here: what the test asserts after the restart (`test/helpers/invariants.ts`).
 */

export interface CrashPointInfo {
  /** The file and function that pass the point. */
  readonly where: string;
  /** What is durable or done when the process dies there. */
  readonly after: string;
}

export const CRASH_POINTS = {
  'journal.accepted': { where: 'agent/journal/durable.ts accept', after: 'the request is fsync\'d in the journal; the message is not acknowledged' },
  'rpc.before-ack': { where: 'agent/rpc/endpoint/server.ts admit', after: 'the journal accepted the request; the ack is not sent' },
  'rpc.after-ack': { where: 'agent/rpc/endpoint/server.ts admit', after: 'the message is acknowledged; the handler has not started' },
  'rpc.before-complete': { where: 'agent/rpc/endpoint/server.ts execute', after: 'the handler finished (and a call was answered); its completion is not journaled' },
  'journal.completed': { where: 'agent/journal/durable.ts complete', after: 'the completion is fsync\'d' },

  'build.recorded': { where: 'agent/compute/lifecycle.ts build', after: 'the BUILDING record is saved; nothing claimed' },
  'build.claimed': { where: 'agent/compute/lifecycle.ts build', after: 'the allocation is in Placement and the NETWORKING record saved' },
  'build.networked': { where: 'agent/compute/lifecycle.ts build', after: 'the ports are bound to this host and the BLOCK_DEVICE_MAPPING record saved; nothing is plugged' },
  'build.volumes': { where: 'agent/compute/lifecycle.ts build', after: 'the volumes are connected to this host (attachments complete) and the SPAWNING record saved; no guest yet' },
  'build.spawned': { where: 'agent/compute/lifecycle.ts build', after: 'the driver spawned the guest; ACTIVE is not saved' },

  'terminate.recorded': { where: 'agent/compute/lifecycle.ts terminate', after: 'the DELETING record is saved; the guest still exists' },
  'terminate.destroyed': { where: 'agent/compute/lifecycle.ts terminate', after: 'the guest is destroyed; the allocation is still in Placement' },
  'terminate.forgotten': { where: 'agent/compute/lifecycle.ts terminate', after: 'the allocation removal is recorded and the instance record dropped; Placement is not asked yet' },
  'terminate.freed': { where: 'agent/compute/lifecycle.ts terminate', after: 'the allocation removal was tried once (done, or left to the background retry)' },

  'resize.prep.recorded': { where: 'agent/compute/resize.ts prepResize (dest)', after: 'the incoming record is saved; nothing claimed' },
  'resize.prep.claimed': { where: 'agent/compute/resize.ts prepResize (dest)', after: 'the destination\'s claim and the allocation swap are done and saved; resize_instance not cast' },
  'resize.prep.cast': { where: 'agent/compute/resize.ts prepResize (dest)', after: 'resize_instance is cast to the source' },
  'resize.source.recorded': { where: 'agent/compute/resize.ts resizeInstance (source)', after: 'the migration record is saved; the disk is not moved' },
  'resize.source.moved': { where: 'agent/compute/resize.ts resizeInstance (source)', after: 'the driver moved the disk and powered off; post-migrating is not saved' },
  'resize.source.cast': { where: 'agent/compute/resize.ts resizeInstance (source)', after: 'finish_resize is cast to the destination' },
  'resize.finish.recorded': { where: 'agent/compute/resize.ts finishResize (dest)', after: 'resize_finish.start is saved; the driver has not finished the migration' },
  'resize.finish.spawned': { where: 'agent/compute/resize.ts finishResize (dest)', after: 'the driver finished the migration; RESIZED is not saved' },

  'confirm.recorded': { where: 'agent/compute/resize.ts confirmResize (source)', after: 'status confirming is saved; the source copy exists' },
  'confirm.driver': { where: 'agent/compute/resize.ts confirmResize (source)', after: 'the driver dropped the source copy; the migration consumer still holds the source allocation' },
  'confirm.freed': { where: 'agent/compute/resize.ts confirmResize (source)', after: 'the migration consumer is emptied; the source record is not dropped' },
  'confirm.before-cast': { where: 'agent/compute/resize.ts confirmResize (source)', after: 'the source record is dropped; confirm_resize_at_destination is not cast' },
  'confirm.dest': { where: 'agent/compute/resize.ts confirmAtDestination (dest)', after: 'the destination record is plain ACTIVE and saved' },

  'revert.dest.recorded': { where: 'agent/compute/resize.ts revertResize (dest)', after: 'status reverting is saved at the destination; its copy exists' },
  'revert.dest.before-cast': { where: 'agent/compute/resize.ts revertResize (dest)', after: 'the destination copy and record are gone; finish_revert_resize is not cast' },
  'revert.source.recorded': { where: 'agent/compute/resize.ts finishRevertResize (source)', after: 'status reverted is saved; the allocations are not swapped back' },
  'revert.source.swapped': { where: 'agent/compute/resize.ts finishRevertResize (source)', after: 'the instance holds the source allocation again; the driver has not restarted it' },
  'revert.source.spawned': { where: 'agent/compute/resize.ts finishRevertResize (source)', after: 'the driver restarted the source copy; ACTIVE is not saved' },

  'live.check.recorded': { where: 'agent/compute/live.ts checkDestination (dest)', after: 'the incoming record is saved; nothing claimed' },
  'live.check.claimed': { where: 'agent/compute/live.ts checkDestination (dest)', after: 'the destination\'s claim and the allocation swap are done and saved; the source is not asked' },
  'live.check.answered': { where: 'agent/compute/live.ts checkDestination (dest)', after: 'the migrate data is saved; the call is not answered' },
  'live.source.recorded': { where: 'agent/compute/live.ts liveMigration (source)', after: 'the migration record is saved; pre_live_migration is not called' },
  'live.dest.prepared': { where: 'agent/compute/live.ts preLiveMigration (dest)', after: 'status preparing is saved at the destination; the call is not answered' },
  'live.source.running': { where: 'agent/compute/live.ts liveMigration (source)', after: 'pre_live_migration answered and status running is saved; the driver has not migrated' },
  'live.source.migrated': { where: 'agent/compute/live.ts liveMigration (source)', after: 'the driver migrated the guest; post-migrating is saved' },
  'live.dest.post': { where: 'agent/compute/live.ts postAtDestination (dest)', after: 'the destination driver finished; the plain ACTIVE record is not saved' },
  'live.source.posted': { where: 'agent/compute/live.ts liveMigration (source)', after: 'post_live_migration_at_destination answered; the migration consumer still holds the source allocation' },
  'live.source.freed': { where: 'agent/compute/live.ts liveMigration (source)', after: 'the migration consumer is emptied; the source record is not dropped' },
} as const satisfies Record<string, CrashPointInfo>;

export type CrashPointName = keyof typeof CRASH_POINTS;

/** The environment variable that arms one point. */
export const CRASH_AT_ENV = 'COMPUTE_AGENT_CRASH_AT';

/** A malformed `COMPUTE_AGENT_CRASH_AT`: refused loudly so a test never runs unarmed by mistake. */
export class CrashPointSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CrashPointSpecError';
  }
}

export interface ArmedPoint {
  readonly name: CrashPointName;
  readonly nth: number;
}

/** Parses `<point>[:<nth>]`; undefined or empty is unarmed. @throws CrashPointSpecError */
export function parseCrashAt(spec: string | undefined): ArmedPoint | undefined {
  if (spec === undefined || spec === '') return undefined;
  const [name = '', count, ...rest] = spec.split(':');
  const nth = count === undefined ? 1 : Number(count);
  if (rest.length > 0 || !Number.isInteger(nth) || nth < 1) throw new CrashPointSpecError(`${CRASH_AT_ENV}=${spec}: expected <point>[:<nth>] with nth a positive integer`);
  if (!Object.hasOwn(CRASH_POINTS, name)) throw new CrashPointSpecError(`${CRASH_AT_ENV}=${spec}: no crash point named ${name}`);
  return { name: name as CrashPointName, nth };
}

const armed = parseCrashAt(process.env[CRASH_AT_ENV]);
let passes = 0;

/** Dies here, as SIGKILL would, when this is the armed point's nth pass; otherwise nothing. */
export function crashPoint(name: CrashPointName): void {
  if (armed === undefined || armed.name !== name) return;
  passes++;
  if (passes < armed.nth) return;
  process.stderr.write(`crash point ${name} reached (pass ${passes}): SIGKILL\n`);
  process.kill(process.pid, 'SIGKILL');
}
