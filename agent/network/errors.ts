/**
 * Errors of the Neutron client and of the network flows, one class per failure. Each names the
 * request (`PUT /v2.0/ports/<id>`) or the port, so a build's fault says what failed and where.
 */

/** Base class of every Neutron failure. */
export class NeutronError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NeutronError';
  }
}

/** 404: no such port, network, subnet or binding (or not visible to this user). */
export class NeutronNotFoundError extends NeutronError {
  constructor(readonly request: string, detail = '') {
    super(`${request}: not found in Neutron (404)${detail}`);
    this.name = 'NeutronNotFoundError';
  }
}

/** 409: the resource is in a state that refuses the request (a binding that exists, a MAC in use). */
export class NeutronConflictError extends NeutronError {
  constructor(readonly request: string, detail: string) {
    super(`${request}: Neutron refused it as a conflict (409)${detail}`);
    this.name = 'NeutronConflictError';
  }
}

/** A definite refusal other than 404/409 (400 bad request, 403 policy, 413 quota): retrying cannot help. */
export class NeutronRefusedError extends NeutronError {
  constructor(readonly request: string, readonly status: number, detail: string) {
    super(`${request}: Neutron refused it (${status})${detail}`);
    this.name = 'NeutronRefusedError';
  }
}

/** No answer (refused, reset, timed out) or a 5xx, after every retry. */
export class NeutronUnavailableError extends NeutronError {
  constructor(readonly request: string, detail: string, options?: { cause?: unknown }) {
    super(`${request}: Neutron unavailable: ${detail}`, options);
    this.name = 'NeutronUnavailableError';
  }
}

/** 401/403 after a fresh token, or no token or endpoint could be had. */
export class NeutronAuthError extends NeutronError {
  constructor(readonly request: string, detail: string, options?: { cause?: unknown }) {
    super(`${request}: ${detail}`, options);
    this.name = 'NeutronAuthError';
  }
}

/** A 2xx whose body does not have the shape the agent reads. */
export class NeutronResponseError extends NeutronError {
  constructor(readonly request: string, detail: string) {
    super(`${request}: unexpected answer from Neutron: ${detail}`);
    this.name = 'NeutronResponseError';
  }
}

/** A port Neutron could not bind to this host (`binding:vif_type` is `binding_failed` or `unbound`). */
export class PortBindingFailedError extends NeutronError {
  constructor(readonly portId: string, readonly host: string, vifType: string) {
    super(`port ${portId}: Neutron could not bind it to host ${host} (binding:vif_type ${vifType}); check that a network agent runs on ${host}`);
    this.name = 'PortBindingFailedError';
  }
}

/** A request the agent cannot serve as asked (a port already in use, a network that cannot be found). */
export class NetworkRequestError extends NeutronError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'NetworkRequestError';
  }
}

/** A port the user gave belongs to another device (or, for an attach, is this instance's already). */
export class PortInUseError extends NetworkRequestError {
  constructor(readonly portId: string, readonly deviceId: string) {
    super(`port ${portId} is in use by ${deviceId}`);
    this.name = 'PortInUseError';
  }
}

/** A requested network Neutron does not have, or does not show the agent's user. */
export class NetworkNotFoundError extends NetworkRequestError {
  constructor(readonly networkId: string) {
    super(`network ${networkId} could not be found in Neutron (or is not visible to the agent's user)`);
    this.name = 'NetworkNotFoundError';
  }
}

/**
 * A port with a resource request (minimum-bandwidth QoS) whose request group cannot be tied to the
 * provider the scheduler took it from: binding it without `binding:profile.allocation` naming
 * that provider would give the guest a port without its guarantee.
 */
export class PortAllocationError extends NeutronError {
  constructor(readonly portId: string, readonly groupId: string, why: string) {
    super(`port ${portId}: cannot name the resource provider of its request group ${groupId} in binding:profile.allocation: ${why}`);
    this.name = 'PortAllocationError';
  }
}

/** Networks were asked for, but the agent has no Neutron to ask (`[placement] auth_type = noauth` and no `[neutron] endpoint_override`). */
export class NetworkNotConfiguredError extends NeutronError {
  constructor() {
    super('the build asks for networks, but this agent has no Neutron: set [placement] keystone credentials (the catalog names Neutron) or [neutron] endpoint_override');
    this.name = 'NetworkNotConfiguredError';
  }
}

/** A port's `network-vif-plugged` did not come in time, or came as `failed`. */
export class VifPlugTimeoutError extends NeutronError {
  constructor(readonly instance: string, readonly portIds: readonly string[], readonly seconds: number, readonly failed = false) {
    super(
      failed
        ? `Neutron reported port ${portIds.join(', ')} of instance ${instance} as failed to plug (network-vif-plugged status failed)`
        : `no network-vif-plugged from Neutron within ${seconds} s for port ${portIds.join(', ')} of instance ${instance} ([DEFAULT] vif_plugging_timeout)`,
    );
    this.name = 'VifPlugTimeoutError';
  }
}

/** The words for a move of a server with ports, which this agent does not make yet (its ports would stay bound here). */
export function movesWithPortsRefused(instance: string, ports: readonly string[], host: string): string {
  return `instance ${instance} has ports (${ports.join(', ')}) but host ${host} has no Neutron configured ([neutron] section) to move their bindings with`;
}
