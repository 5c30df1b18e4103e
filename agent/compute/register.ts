/**
 * Puts the compute methods (`methods.ts`) on the RPC dispatcher: nova's compute API 6.x under the
 * default namespace with nova's argument names (Python binds by name, so an unknown argument is a
 * TypeError), and the agent's own methods under `compute_agent` 1.0. Errors the manager raises
 * become nova.exception failures the caller can rebuild (`InstanceNotFound`,
 * `InstanceInvalidState`, `ComputeResourcesUnavailable`, ...).
 */
import { arg } from '../rpc/endpoint/args';
import type { Dispatcher } from '../rpc/endpoint/dispatcher';
import { NovaError } from '../rpc/oslo/errors';
import { AllocationConflictError, ClaimMismatchError, InsufficientResourcesError, InvalidClaimError, InvalidExtraSpecError } from '../../tracker/claims/errors';
import { MigrationPreCheckError } from '../../virt-drivers/errors';
import { ArgumentError } from './decode';
import type { ComputeMethod } from './methods';
import { InstanceNotFoundError, InvalidStateError } from '../../model/instance';

/** nova's argument names per method (rpc-protocol.md section 4). */
const ARGS: Readonly<Record<string, readonly string[]>> = {
  build_and_run_instance: ['instance', 'image', 'request_spec', 'filter_properties', 'admin_password', 'injected_files', 'requested_networks', 'security_groups', 'block_device_mapping', 'node', 'limits', 'host_list', 'accel_uuids'],
  terminate_instance: ['instance', 'bdms'],
  prep_resize: ['instance', 'flavor', 'image', 'request_spec', 'filter_properties', 'node', 'migration', 'clean_shutdown', 'host_list'],
  resize_instance: ['instance', 'migration', 'image', 'flavor', 'clean_shutdown', 'request_spec'],
  finish_resize: ['instance', 'migration', 'image', 'disk_info', 'request_spec'],
  confirm_resize: ['instance', 'migration'],
  revert_resize: ['instance', 'migration', 'request_spec'],
  finish_revert_resize: ['instance', 'migration', 'request_spec'],
  check_can_live_migrate_destination: ['instance', 'block_migration', 'disk_over_commit', 'migration', 'limits'],
  check_can_live_migrate_source: ['instance', 'dest_check_data'],
  live_migration: ['instance', 'dest', 'block_migration', 'migration', 'migrate_data'],
  pre_live_migration: ['instance', 'disk', 'migrate_data', 'block_migration'],
  post_live_migration_at_destination: ['instance', 'block_migration'],
  rollback_live_migration_at_destination: ['instance', 'destroy_disks', 'migrate_data'],
  drop_move_claim_at_destination: ['instance', 'migration'],
  confirm_resize_at_destination: ['instance', 'migration'],
  list_instances: [],
  show_instance: ['instance'],
};

/** Our errors as nova.exception failures. */
export function toNovaError(e: unknown): unknown {
  if (!(e instanceof Error) || e instanceof NovaError) return e;
  const as = (cls: string, code: number): NovaError => new NovaError(cls, e.message, {}, code, { cause: e });
  if (e instanceof InstanceNotFoundError) return as('InstanceNotFound', 404);
  if (e instanceof InvalidStateError) return as('InstanceInvalidState', 409);
  if (e instanceof ArgumentError || e instanceof InvalidExtraSpecError) return as('Invalid', 400);
  if (e instanceof InsufficientResourcesError || e instanceof InvalidClaimError) return as('ComputeResourcesUnavailable', 500);
  if (e instanceof AllocationConflictError) return as('AllocationMoveFailed', 409);
  if (e instanceof ClaimMismatchError) return as('ConsumerAllocationRetrievalFailed', 500);
  if (e instanceof MigrationPreCheckError) return as('MigrationPreCheckError', 400);
  return e;
}

export function registerComputeMethods(dispatcher: Dispatcher, methods: readonly ComputeMethod[]): void {
  for (const m of methods) {
    const names = ARGS[m.name] ?? [];
    const spec = Object.fromEntries(names.map((n) => [n, arg.optional(arg.any(), undefined)]));
    dispatcher.register({
      name: m.name,
      namespace: m.namespace,
      versions: m.namespace === null ? { min: '6.0' } : { min: '1.0' },
      args: spec,
      orderingKey: (a) => m.key(a as Readonly<Record<string, unknown>>),
      journaled: m.journaled,
      handler: async (a, call) => {
        try {
          return await m.handle(a as Readonly<Record<string, unknown>>, call.context);
        } catch (e) {
          throw toNovaError(e);
        }
      },
    });
  }
}
