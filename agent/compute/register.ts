/**
 * Puts method table rows (`method-table.ts`) on the RPC dispatcher: the row's decoders decode a
 * request on arrival, before it is journaled (Python binds arguments by name, so a missing or
 * unknown one is a TypeError), its key orders it, and the errors the flows raise become
 * nova.exception failures the caller can rebuild (`InstanceNotFound`, `InstanceInvalidState`,
 * `ComputeResourcesUnavailable`, ...).
 */
import type { Dispatcher } from '../rpc/endpoint/dispatcher';
import { NovaError } from '../rpc/oslo/errors';
import { AllocationConflictError, ClaimMismatchError, InsufficientResourcesError, InvalidClaimError, InvalidExtraSpecError } from '../../tracker/claims/errors';
import { MigrationPreCheckError } from '../../virt-drivers/errors';
import { ArgumentError } from './decode';
import type { ComputeMethod } from './method-table';
import type { RequestContext } from './ports';
import { InstanceNotFoundError, InvalidStateError } from '../../model/instance';

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

/** Called when a cast about an instance failed because this host has no record of the instance. */
export type UnknownInstanceCast = (uuid: string, method: string, ctx: RequestContext) => Promise<void>;

/**
 * Registers every row on `dispatcher`; a cast of an instance row that finds no record of its
 * instance is handed to `unknownInstance` (nobody hears a cast's failure, and its caller may have
 * set a task state). @throws RegistrationError for a duplicate or malformed row
 */
export function registerMethods(dispatcher: Dispatcher, rows: readonly ComputeMethod[], unknownInstance?: UnknownInstanceCast): Dispatcher {
  for (const row of rows) {
    dispatcher.register({
      name: row.name,
      namespace: row.namespace,
      versions: row.versions,
      args: row.args,
      journaled: row.journaled,
      orderingKey: (a) => row.key?.(a),
      handler: async (a, call) => {
        try {
          return await row.handle(a, { context: call.context, sent: call.args });
        } catch (e) {
          const uuid = row.key?.(a);
          if (e instanceof InstanceNotFoundError && !call.isCall && uuid !== undefined) await unknownInstance?.(uuid, row.name, call.context);
          throw toNovaError(e);
        }
      },
    });
  }
  return dispatcher;
}
