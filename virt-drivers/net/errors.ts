/**
 * Errors of VIF plugging, one class per failure, each accepting a `cause`; both are
 * `DriverError`s, so a failed build reports them like any other driver failure.
 */
import { DriverError } from '../errors';

/** The port's binding gives a VIF type this host cannot plug (`binding_failed`, `unbound`, `vhostuser`, ...). */
export class VifTypeNotSupportedError extends DriverError {
  constructor(
    readonly port: string,
    readonly vifType: string,
  ) {
    const why =
      vifType === 'binding_failed' || vifType === 'unbound'
        ? 'Neutron could not bind it to this host (is a network agent / ovn-controller alive here with this host name?)'
        : 'this host plugs only vif_type ovs';
    super(`port ${port}: cannot plug vif_type ${JSON.stringify(vifType)}: ${why}`);
    this.name = 'VifTypeNotSupportedError';
  }
}

/** A host command of plugging or unplugging failed (ip, ovs-vsctl). */
export class VifPlugError extends DriverError {
  constructor(
    readonly port: string,
    readonly step: string,
    options?: { cause?: unknown },
  ) {
    const detail = options?.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(`port ${port}: ${step} failed${detail}`, options);
    this.name = 'VifPlugError';
  }
}
