/**
 * The failures of `attach_interface` and `detach_interface` (`interfaces.ts`), one class each, in
 * the `nova.exception` form nova-compute raises them (nova `exception.py`), so nova-api answers an
 * attach as it would for nova-compute (nova `api/openstack/compute/attach_interfaces.py`: 400 for
 * the Invalid ones, 404 for PortNotFound and NetworkNotFound, 409 for PortInUse and
 * FixedIpAlreadyInUse, 500 for InterfaceAttachFailed). Each message says what went wrong here, and
 * `cause` keeps the error it came from (Neutron's, the driver's).
 *
 * `attachFailure` maps what an attach step threw onto these. Not here: the flow itself.
 */
import { NetworkNotFoundError as NeutronNetworkNotFound, NeutronConflictError, NeutronNotFoundError, PortBindingFailedError, PortInUseError as NeutronPortInUse } from '../network/errors';
import { NovaError } from '../rpc/oslo/errors';
import { errorText } from '../../lib/error-text';

type Opts = { readonly cause?: unknown };

/** The driver (or anything not named below) failed the attach; what was done is undone. nova: `InterfaceAttachFailed` (500). */
export class InterfaceAttachFailedError extends NovaError {
  constructor(readonly instance: string, detail: string, options?: Opts) {
    super('InterfaceAttachFailed', `Failed to attach network adapter device to ${instance}: ${detail}`, { instance_uuid: instance }, 500, options);
  }
}

/** The virt driver cannot attach interfaces at all. nova: `AttachInterfaceNotSupported` (400). */
export class AttachInterfaceNotSupportedError extends NovaError {
  constructor(readonly instance: string, driver: string) {
    super('AttachInterfaceNotSupported', `Attaching interfaces is not supported for instance ${instance} (virt driver ${driver}).`, { instance_uuid: instance }, 400);
  }
}

/** A tag was asked for, and the driver cannot show tags to the guest. nova: `NetworkInterfaceTaggedAttachNotSupported` (400). */
export class TaggedAttachNotSupportedError extends NovaError {
  constructor(driver: string) {
    super('NetworkInterfaceTaggedAttachNotSupported', `Tagged network interface attachment is not supported for this server instance (virt driver ${driver} has no device tagging).`, {}, 400);
  }
}

/** The port belongs to another device, or is attached to this instance already. nova: `PortInUse` (400; nova-api answers 409). */
export class PortInUseError extends NovaError {
  constructor(readonly portId: string, detail: string, options?: Opts) {
    super('PortInUse', `Port ${portId} is still in use: ${detail}.`, { port_id: portId }, 400, options);
  }
}

/** The port Neutron does not have. nova: `PortNotFound` (404). */
export class PortNotFoundError extends NovaError {
  constructor(readonly portId: string, detail: string, options?: Opts) {
    super('PortNotFound', `Port id ${portId} could not be found: ${detail}`, { port_id: portId }, 404, options);
  }
}

/** The network Neutron does not have (or does not show the agent). nova: `NetworkNotFound` (404). */
export class NetworkNotFoundError extends NovaError {
  constructor(readonly networkId: string, options?: Opts) {
    super('NetworkNotFound', `Network ${networkId} could not be found.`, { network_id: networkId }, 404, options);
  }
}

/** The requested fixed IP is taken. nova: `FixedIpAlreadyInUse` (nova-api answers 409). */
export class FixedIpAlreadyInUseError extends NovaError {
  constructor(readonly address: string, instance: string, options?: Opts) {
    super('FixedIpAlreadyInUse', `Fixed IP address ${address} is already in use (attach to instance ${instance}).`, { address, instance_uuid: instance }, 500, options);
  }
}

/** Neutron could not bind the port to this host. nova: `PortBindingFailed` (400). */
export class PortBindingFailedNovaError extends NovaError {
  constructor(readonly portId: string, detail: string, options?: Opts) {
    super('PortBindingFailed', `Binding failed for port ${portId}: ${detail}`, { port_id: portId }, 400, options);
  }
}

/**
 * The interface could not be detached: the guest did not release the device (it stays attached
 * and recorded), or Neutron could not be told after it was unplugged. nova: `InterfaceDetachFailed` (400).
 */
export class InterfaceDetachFailedError extends NovaError {
  constructor(readonly instance: string, readonly portId: string, detail: string, options?: Opts) {
    super('InterfaceDetachFailed', `Failed to detach network adapter device (port ${portId}) from ${instance}: ${detail}`, { instance_uuid: instance }, 400, options);
  }
}

/**
 * The attach this request made was interrupted by a restart and has been undone (its caller gave
 * up waiting long ago; redoing it would attach a NIC its user was told failed). nova: `InterfaceAttachFailed`.
 */
export class InterfaceAttachInterruptedError extends NovaError {
  constructor(readonly instance: string) {
    super('InterfaceAttachFailed', `Failed to attach network adapter device to ${instance}: the attach was interrupted by a restart of compute-agent and has been undone; ask again`, { instance_uuid: instance }, 500);
  }
}

/** What an attach step threw, as the failure nova-compute would raise for it; the requested port and address name the subject. */
export function attachFailure(e: unknown, instance: string, request: { readonly port_id?: string; readonly address?: string }): NovaError {
  if (e instanceof NovaError) return e;
  const opts = { cause: e };
  if (e instanceof NeutronPortInUse) return new PortInUseError(e.portId, `Neutron has it on device ${e.deviceId}`, opts);
  if (e instanceof NeutronNetworkNotFound) return new NetworkNotFoundError(e.networkId, opts);
  if (e instanceof PortBindingFailedError) return new PortBindingFailedNovaError(e.portId, e.message, opts);
  if (e instanceof NeutronNotFoundError && request.port_id) return new PortNotFoundError(request.port_id, e.message, opts);
  if (e instanceof NeutronConflictError && request.address) return new FixedIpAlreadyInUseError(request.address, instance, opts);
  return new InterfaceAttachFailedError(instance, errorText(e), opts);
}
