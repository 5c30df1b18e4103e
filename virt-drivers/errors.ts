/**
 * Errors a virt driver throws, one class per failure, each accepting a `cause`. The compute
 * manager branches on the class (`instanceof`), never on message text.
 */

/** Base class: something a driver could not do. */
export class DriverError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DriverError';
  }
}

/** The driver could not start (`init`): bad configuration, host file unreadable, hypervisor down. */
export class DriverInitError extends DriverError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DriverInitError';
  }
}

/** `[DEFAULT] compute_driver` names no registered driver. */
export class UnknownDriverError extends DriverError {
  constructor(
    readonly driver: string,
    readonly known: readonly string[],
  ) {
    super(`no virt driver named ${JSON.stringify(driver)}; registered: ${known.join(', ') || 'none'}`);
    this.name = 'UnknownDriverError';
  }
}

/** `[DEFAULT] compute_driver` is not set: the agent has no default driver. */
export class DriverNotChosenError extends DriverError {
  constructor(readonly known: readonly string[]) {
    super(`DEFAULT.compute_driver missing: the agent has no default virt driver; expected one of ${known.join(', ') || 'none registered'}`);
    this.name = 'DriverNotChosenError';
  }
}

/** The instance is not on this host. */
export class InstanceNotFoundError extends DriverError {
  constructor(readonly instance: string) {
    super(`instance ${instance} is not on this host`);
    this.name = 'InstanceNotFoundError';
  }
}

/** The instance is already on this host (spawn, finishMigration, preLiveMigration twice). */
export class InstanceExistsError extends DriverError {
  constructor(readonly instance: string) {
    super(`instance ${instance} already exists on this host`);
    this.name = 'InstanceExistsError';
  }
}

/** The operation is not valid in the instance's current state (power on a migrating instance). */
export class InstanceStateError extends DriverError {
  constructor(
    readonly instance: string,
    readonly state: string,
    readonly operation: string,
  ) {
    super(`instance ${instance} is ${state}; cannot ${operation}`);
    this.name = 'InstanceStateError';
  }
}

/** This driver does not implement the operation. */
export class NotSupportedError extends DriverError {
  constructor(
    readonly driver: string,
    readonly operation: string,
  ) {
    super(`the ${driver} driver does not support ${operation}`);
    this.name = 'NotSupportedError';
  }
}

/** The instance offers no console of that kind: the kind is off on this host, or the guest was made without it. */
export class ConsoleUnavailableError extends DriverError {
  constructor(
    readonly instance: string,
    readonly kind: string,
    reason: string,
  ) {
    super(`instance ${instance} has no ${kind} console: ${reason}`);
    this.name = 'ConsoleUnavailableError';
  }
}

/** The guest has no guest agent to ask (its image did not ask for one: `hw_qemu_guest_agent`). */
export class GuestAgentNotEnabledError extends DriverError {
  constructor(readonly instance: string) {
    super(`instance ${instance} has no guest agent: its image does not set hw_qemu_guest_agent=yes`);
    this.name = 'GuestAgentNotEnabledError';
  }
}

/** A live-migration pre-check failed: the move must not start. */
export class MigrationPreCheckError extends DriverError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MigrationPreCheckError';
  }
}

/** A fault injected into the fake driver by a test. */
export class InjectedFaultError extends DriverError {
  constructor(readonly operation: string, message?: string) {
    super(message ?? `injected fault in ${operation}`);
    this.name = 'InjectedFaultError';
  }
}
