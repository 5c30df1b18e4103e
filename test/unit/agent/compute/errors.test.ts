// The claim service's refusals as the nova.exception failures a caller rebuilds.
import { NovaError } from '../../../../agent/rpc/oslo/errors';
import { toNovaError } from '../../../../agent/compute/register';
import { AllocationConflictError, ClaimMismatchError, InsufficientResourcesError, InvalidClaimError, InvalidExtraSpecError } from '../../../../tracker/claims/errors';

test.each<[string, string, number, Error]>([
  ['InvalidExtraSpecError', 'Invalid', 400, new InvalidExtraSpecError('resources:VGPU', 'one', 'an integer >= 0')],
  ['InsufficientResourcesError', 'ComputeResourcesUnavailable', 500, new InsufficientResourcesError('rp', 'VCPU', 4, 2)],
  ['InvalidClaimError', 'ComputeResourcesUnavailable', 500, new InvalidClaimError('no VGPU inventory')],
  ['AllocationConflictError', 'AllocationMoveFailed', 409, new AllocationConflictError('vm', 'changed by someone else')],
  ['ClaimMismatchError', 'ConsumerAllocationRetrievalFailed', 500, new ClaimMismatchError('vm', 'not the flavor')],
])('%s becomes %s (%i), keeping the message and the cause', (_name, cls, code, e) => {
  const n = toNovaError(e);
  expect(n).toBeInstanceOf(NovaError);
  expect(n).toMatchObject({ className: cls, code, message: e.message });
  expect((n as NovaError).cause).toBe(e);
});
