/**
 * The compute methods by their wire names (nova's compute RPC 6.x names and argument names, plus
 * a few in the agent's own namespace), each with: the instance it is ordered by, whether it must be
 * journaled before acknowledgement, and a handler taking the raw `args` (NovaObject primitives or
 * plain JSON; `decode.ts` normalizes and refuses malformed ones).
 *
 * The RPC layer registers this table with its dispatcher (`register.ts`); tests route agent-to-
 * agent messages through it in-process.
 */
import type { LiveMigrateData } from '../../virt-drivers/types';
import { ArgumentError, decodeDict, decodeFlavor, decodeInstance, decodeMigration, unwrap, type DecodedMigration } from './decode';
import type { ComputeManager } from './manager';
import type { RequestContext } from './ports';
import { AGENT_NAMESPACE } from './resize';

export interface ComputeMethod {
  readonly name: string;
  /** null: nova's compute API; otherwise the agent's own namespace. */
  readonly namespace: string | null;
  readonly journaled: boolean;
  /** The instance uuid requests are ordered by (raw args, before full decoding). */
  key(args: Readonly<Record<string, unknown>>): string | undefined;
  handle(args: Readonly<Record<string, unknown>>, ctx: RequestContext): Promise<unknown>;
}

/** The instance uuid in raw args (primitive or plain), for ordering; undefined when absent. */
export function instanceKey(args: Readonly<Record<string, unknown>>): string | undefined {
  const inst = unwrap(args.instance) as { uuid?: unknown } | undefined;
  return typeof inst?.uuid === 'string' ? inst.uuid : undefined;
}

function uuidOf(args: Readonly<Record<string, unknown>>): string {
  const k = instanceKey(args);
  if (!k) throw new ArgumentError('invalid argument instance: instance.uuid: missing');
  return k;
}

function migrateData(v: unknown, name: string): LiveMigrateData {
  return decodeDict(v, name) as LiveMigrateData;
}

/** Whether a build was claimed by a scheduler: a Selection for this host carries an allocation request. */
function claimedFor(args: Readonly<Record<string, unknown>>, host: string): boolean {
  const list = unwrap(args.host_list);
  if (!Array.isArray(list)) return false;
  return list.some((s) => {
    const sel = s as { service_host?: unknown; allocation_request?: unknown };
    return sel.service_host === host && typeof sel.allocation_request === 'string' && sel.allocation_request !== '';
  });
}

/**
 * The migration of a request sent to its destination: nova's conductor creates the Migration
 * before the scheduler has picked the destination, so `dest_compute` may still be empty; it is
 * this host.
 */
function migrationTo(v: unknown, host: string): DecodedMigration {
  const raw = unwrap(v);
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw) && !(raw as { dest_compute?: unknown }).dest_compute) return decodeMigration({ ...raw, dest_compute: host });
  return decodeMigration(v);
}

export function computeMethods(m: ComputeManager): ComputeMethod[] {
  const { resize, live, host } = m;
  const method = (
    name: string,
    handle: ComputeMethod['handle'],
    opts: { namespace?: string | null; journaled?: boolean } = {},
  ): ComputeMethod => ({
    name,
    namespace: opts.namespace ?? null,
    journaled: opts.journaled ?? true,
    key: instanceKey,
    handle: (a, ctx) => {
      m.controlPlane.received(a);
      return handle(a, ctx);
    },
  });

  return [
    method('build_and_run_instance', async (a, ctx) => {
      const inst = decodeInstance(a.instance);
      const spec = decodeDict(a.request_spec, 'request_spec');
      const flavor = inst.flavor ?? (spec.flavor !== undefined ? decodeFlavor(spec.flavor, 'request_spec.flavor') : undefined);
      if (!flavor) throw new ArgumentError('invalid argument instance: instance.flavor: missing (and no request_spec.flavor)');
      await m.build(inst, flavor, { claimed: claimedFor(a, host) }, ctx);
    }),
    method('terminate_instance', (a, ctx) => m.terminate(uuidOf(a), ctx)),
    method('prep_resize', async (a, ctx) => {
      const inst = decodeInstance(a.instance);
      const vmState = (unwrap(a.instance) as { vm_state?: unknown }).vm_state;
      await resize.prepResize(inst, decodeFlavor(a.flavor), migrationTo(a.migration, host), ctx, typeof vmState === 'string' ? vmState : undefined);
    }),
    method('resize_instance', (a, ctx) => resize.resizeInstance(uuidOf(a), decodeMigration(a.migration), decodeFlavor(a.flavor), ctx)),
    method('finish_resize', (a, ctx) => resize.finishResize(uuidOf(a), decodeMigration(a.migration), typeof a.disk_info === 'string' ? a.disk_info : '', ctx)),
    method('confirm_resize', (a, ctx) => resize.confirmResize(uuidOf(a), decodeMigration(a.migration), ctx)),
    method('revert_resize', (a, ctx) => resize.revertResize(uuidOf(a), decodeMigration(a.migration), ctx)),
    method('finish_revert_resize', (a, ctx) => resize.finishRevertResize(uuidOf(a), decodeMigration(a.migration), ctx)),
    method('check_can_live_migrate_destination', (a, ctx) => live.checkDestination(decodeInstance(a.instance), migrationTo(a.migration, host), ctx)),
    method('check_can_live_migrate_source', (a) => live.checkSource(uuidOf(a), migrateData(a.dest_check_data, 'dest_check_data')), { journaled: false }),
    method('live_migration', (a, ctx) => {
      const mig = decodeMigration({ ...(unwrap(a.migration) as object), dest_compute: typeof a.dest === 'string' ? a.dest : (unwrap(a.migration) as { dest_compute?: unknown }).dest_compute });
      return live.liveMigration(uuidOf(a), mig, migrateData(a.migrate_data, 'migrate_data'), ctx);
    }),
    method('pre_live_migration', (a) => live.preLiveMigration(uuidOf(a), migrateData(a.migrate_data, 'migrate_data'))),
    method('post_live_migration_at_destination', (a, ctx) => live.postAtDestination(uuidOf(a), ctx)),
    method('rollback_live_migration_at_destination', (a) => live.rollbackAtDestination(uuidOf(a), migrateData(a.migrate_data, 'migrate_data'))),
    method('drop_move_claim_at_destination', (a) => resize.dropMoveClaim(uuidOf(a))),
    method('confirm_resize_at_destination', (a) => resize.confirmAtDestination(uuidOf(a), decodeMigration({ ...(unwrap(a.migration) as object) }).uuid), { namespace: AGENT_NAMESPACE }),
    method('list_instances', () => Promise.resolve(m.list()), { namespace: AGENT_NAMESPACE, journaled: false }),
    method('show_instance', (a) => m.show(uuidOf(a)), { namespace: AGENT_NAMESPACE, journaled: false }),
  ];
}
