/**
 * `attach_interface` and `detach_interface`, as nova-compute runs them (nova `compute/manager.py`
 * `_attach_interface`, `_detach_interface`; `network/neutron.py` `allocate_for_instance` with one
 * request, `deallocate_port_for_instance`):
 *
 * - attach (a call): a port made on the network (with the fixed IP asked for) or the user's port
 *   taken over, owned by the instance and bound to this host; the driver plugs the VIF and, when
 *   the guest runs, hot-plugs the NIC (a stopped guest gets it in its definition, for its next
 *   start); the VIF joins the instance's network info (nova's VirtualInterface row and info cache
 *   in nova mode) and is returned. A failure undoes what this attach did (the port deleted, or the
 *   user's unbound) and is raised in nova's form (`interface-errors.ts`).
 * - detach (a cast): the driver hot-unplugs the NIC and unplugs the VIF, then the port is deleted,
 *   or the user's unbound, and the VIF leaves the network info. A guest that does not release the
 *   device keeps it: the interface stays attached and recorded, and the instance gets a fault, in
 *   its state as before.
 *
 * Both run under the instance's lock, from ACTIVE or STOPPED with no task and no move, and change
 * no state (nova sets none for them). Each failure records the instance's fault.
 *
 * Restarts: an attach is recorded (`interface_attach`) before Neutron is asked. Its journaled
 * request replayed after a crash finds the mark under its own request id and undoes what the
 * interrupted try did (the NIC, then every port of the instance Neutron has that the record does
 * not), then fails: its caller gave up long ago. A detach is safe to replay as it is: the driver's
 * detach and Neutron's delete or unbind are idempotent, and the VIF leaves the record last.
 */
import type { InstanceRecord } from '../../model/instance';
import type { NetworkRequest, Vif } from '../../model/network';
import type { NetworkService } from '../network/network-api';
import type { FlowContext } from './flow-context';
import { AttachInterfaceNotSupportedError, attachFailure, InterfaceAttachFailedError, InterfaceAttachInterruptedError, InterfaceDetachFailedError, PortInUseError, PortNotFoundError, TaggedAttachNotSupportedError } from './interface-errors';
import { DEFAULT_AZ } from './network-flows';
import type { RequestContext } from './ports';
import { check, type FlowStep } from './transitions';
import { errorText } from '../../lib/error-text';

export type InterfaceContext = Pick<FlowContext, 'locks' | 'require' | 'save' | 'driver' | 'controlPlane' | 'log' | 'notify'>;

/** The instance an attach is for, as the request names it. */
export interface AttachTarget {
  readonly uuid: string;
  /** nova's Instance.availability_zone (ports get `device_owner = compute:<az>`); absent: nova's default. */
  readonly availability_zone?: string;
}

export class InterfaceFlows {
  constructor(
    private readonly c: InterfaceContext,
    private readonly network: NetworkService,
  ) {}

  /**
   * `attach_interface`: returns the new VIF (nova's network-model VIF).
   * @throws InvalidStateError, InstanceNotFoundError (nothing done); the errors of `interface-errors.ts` (what was done is undone, the fault recorded)
   */
  attach(target: AttachTarget, request: NetworkRequest, ctx: RequestContext): Promise<Vif> {
    const c = this.c;
    return c.locks.with(target.uuid, async () => {
      const rec = c.require(target.uuid);
      const requestId = ctx.request_id ?? '';
      const left = rec.interface_attach;
      if (left) {
        await this.undoInterrupted(rec).catch((e: unknown) => {
          throw new InterfaceAttachFailedError(rec.uuid, `an attach interrupted by a restart could not be undone first: ${errorText(e)}`, { cause: e });
        });
        if (left.request_id === requestId) throw new InterfaceAttachInterruptedError(rec.uuid);
      }
      check(rec, 'interface_attach.start');
      const portId = request.kind === 'port' ? request.port_id : null;
      rec.interface_attach = { request_id: requestId, port_id: portId };
      await c.save(rec);
      await c.notify(rec, 'interface_attach.start', ctx);
      let vif: Vif | undefined;
      try {
        this.checkSupported(rec, request);
        if (portId && (rec.network_info ?? []).some((v) => v.id === portId)) throw new PortInUseError(portId, `already attached to instance ${rec.uuid}`);
        const [bound] = await this.network.allocate(
          { uuid: rec.uuid, project_id: rec.project_id, hostname: rec.name, availability_zone: target.availability_zone ?? DEFAULT_AZ },
          { kind: 'list', requests: [request] },
          [],
        );
        if (!bound) throw new InterfaceAttachFailedError(rec.uuid, 'Neutron bound no port');
        vif = bound;
        rec.interface_attach = { request_id: requestId, port_id: portId, vif };
        await c.save(rec);
        await c.driver.attachInterface(rec, vif);
      } catch (e) {
        // Neutron's allocate gives back what it made when it throws, and the driver what it did
        // when its attach throws; the port bound for a driver that failed goes back here.
        const undone = vif ? await this.giveBack(rec, vif) : true;
        if (undone) delete rec.interface_attach;
        const subject = request.kind === 'port' ? { port_id: request.port_id } : request.address ? { address: request.address } : {};
        throw await this.fail(rec, 'interface_attach.error', attachFailure(e, rec.uuid, subject), ctx);
      }
      const info = [...(rec.network_info ?? []), vif];
      rec.network_info = info;
      delete rec.interface_attach;
      await c.save(rec);
      c.log.info({ instance: rec.uuid, port: vif.id, network: vif.network.id }, 'interface attached');
      await c.controlPlane.network(rec.uuid, { kind: 'allocated', info, added: [vif] }, ctx);
      await c.notify(rec, 'interface_attach.end', ctx);
      return vif;
    });
  }

  /**
   * `detach_interface`. A port the instance does not have, a guest that keeps the device, or a
   * Neutron that cannot be told: the fault recorded, the interface left as it is.
   * @throws InvalidStateError, InstanceNotFoundError (nothing done), PortNotFoundError, InterfaceDetachFailedError
   */
  detach(uuid: string, portId: string, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      check(rec, 'interface_detach.start');
      await c.notify(rec, 'interface_detach.start', ctx);
      const vif = (rec.network_info ?? []).find((v) => v.id === portId);
      if (!vif) throw await this.fail(rec, 'interface_detach.error', new PortNotFoundError(portId, `not attached to instance ${uuid}`), ctx);
      try {
        await c.driver.detachInterface(rec, vif);
      } catch (e) {
        throw await this.fail(rec, 'interface_detach.error', new InterfaceDetachFailedError(uuid, portId, `${errorText(e)}; the interface stays attached`, { cause: e }), ctx);
      }
      const preserved = vif.preserve_on_delete || (rec.preserved_ports ?? []).includes(portId);
      try {
        await this.network.deallocatePort(uuid, portId, preserved);
      } catch (e) {
        // The NIC is out of the guest; the VIF stays recorded so that asking again finishes it.
        const detail = `the NIC is out of the guest, but Neutron could not ${preserved ? 'release' : 'delete'} the port: ${errorText(e)}; ask again`;
        throw await this.fail(rec, 'interface_detach.error', new InterfaceDetachFailedError(uuid, portId, detail, { cause: e }), ctx);
      }
      const info = (rec.network_info ?? []).filter((v) => v.id !== portId);
      rec.network_info = info;
      if (rec.preserved_ports?.includes(portId)) rec.preserved_ports = rec.preserved_ports.filter((p) => p !== portId);
      await c.save(rec);
      c.log.info({ instance: uuid, port: portId, deleted: !preserved }, 'interface detached');
      await c.controlPlane.network(uuid, { kind: 'detached', info, removed: vif }, ctx);
      await c.notify(rec, 'interface_detach.end', ctx);
    });
  }

  /** nova refuses an attach the driver cannot do (`supports_attach_interface`, `supports_tagged_attach_interface`). */
  private checkSupported(rec: InstanceRecord, request: NetworkRequest): void {
    const { capabilities, name } = this.c.driver;
    if (!capabilities.supports_attach_interface) throw new AttachInterfaceNotSupportedError(rec.uuid, name);
    if (request.tag && !capabilities.supports_tagged_attach_interface) throw new TaggedAttachNotSupportedError(name);
  }

  /** Gives a port bound for a failed attach back to Neutron; resolves false when it could not (then logged). */
  private async giveBack(rec: InstanceRecord, vif: Vif): Promise<boolean> {
    try {
      await this.network.deallocatePort(rec.uuid, vif.id, vif.preserve_on_delete);
      return true;
    } catch (e) {
      this.c.log.warn({ instance: rec.uuid, port: vif.id, reason: errorText(e) }, 'could not undo the failed attach; the next attach or the delete of the instance takes the port back');
      return false;
    }
  }

  /**
   * Undoes an attach a restart interrupted (`rec.interface_attach`): the NIC out of the driver, and
   * every port of the instance Neutron has that the record does not list given back (the user's
   * unbound, the rest deleted). @throws what the driver or Neutron threw (the mark is kept)
   */
  private async undoInterrupted(rec: InstanceRecord): Promise<void> {
    const left = rec.interface_attach;
    if (!left) return;
    if (left.vif) await this.c.driver.detachInterface(rec, left.vif);
    const known = new Set((rec.network_info ?? []).map((v) => v.id));
    const strays = (await this.network.portIdsOf(rec.uuid)).filter((id) => !known.has(id));
    for (const id of strays) await this.network.deallocatePort(rec.uuid, id, id === left.port_id);
    delete rec.interface_attach;
    await this.c.save(rec);
    this.c.log.warn({ instance: rec.uuid, ports: strays, request: left.request_id }, 'an interface attach interrupted by a restart was undone');
  }

  /** Records the fault, reports `step`, and returns `err` for the caller to throw. */
  private async fail<E extends Error>(rec: InstanceRecord, step: FlowStep, err: E, ctx: RequestContext): Promise<E> {
    const fault = `${step === 'interface_attach.error' ? 'interface attach' : 'interface detach'} failed: ${err.message}`;
    rec.fault = fault;
    await this.c.save(rec);
    this.c.log.warn({ instance: rec.uuid, fault }, `${step.split('.')[0] ?? step} failed`);
    await this.c.notify(rec, step, ctx, fault);
    return err;
  }
}
