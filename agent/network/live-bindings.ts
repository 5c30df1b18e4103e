/**
 * A live migration's port bindings, as nova does them with Neutron's `binding-extended` extension
 * (nova `conductor/tasks/live_migrate.py` `_bind_ports_on_destination`, `network/neutron.py`
 * `setup_networks_on_host`, `migrate_instance_start`, `migrate_instance_finish`): for the length
 * of the move a port has two bindings, the source's ACTIVE one and the destination's INACTIVE one.
 *
 *   destination, pre_live_migration   `prepareHere`: its binding (nova's conductor made it; made
 *                                      here when no one did), `binding:profile.migrating_to` set;
 *                                      the VIFs to plug come from that binding
 *   source, once the guest runs there  `activate`: the destination's binding becomes the port's
 *   destination, post_..._at_dest      `settleHere`: `migrating_to` taken out
 *   source, last                       the source's binding deleted (`NetworkService.dropBindings`)
 *   either, on rollback                `abandon`: the destination's binding deleted while it is
 *                                      still INACTIVE, `migrating_to` taken out
 *
 * Under OVN, `migrating_to` makes Neutron list both chassis in the port's `requested-chassis`, so
 * the destination claims the port as soon as its tap exists and lets traffic through once the
 * guest announces itself there (QEMU's RARP after the migration).
 *
 * It is: the Neutron calls, each idempotent, so a step retried after a restart does no harm. It
 * is not: plugging (the virt driver) or the order of the steps (`agent/compute/live.ts`).
 */
import type { Logger } from '../../lib/logging/logger';
import type { NetworkInfo } from '../../model/network';
import { NeutronConflictError, NeutronNotFoundError, PortBindingFailedError } from './errors';
import type { NeutronApi, NeutronBinding, NeutronPort } from './neutron-api';
import { profileWithout, vifsFor } from './port-vifs';

export interface LiveBindingsOptions {
  readonly neutron: NeutronApi;
  /** `[DEFAULT] host`. */
  readonly host: string;
  readonly logger: Logger;
}

export class LiveBindings {
  constructor(private readonly o: LiveBindingsOptions) {}

  /**
   * Destination: each of `portIds` has a binding to this host (the conductor's, or one made here
   * with the port's vnic type and profile) and `migrating_to` naming this host. Resolves the VIFs
   * as this host's binding describes them, in the order of `portIds`; `preserved` names the user's
   * ports. A binding Neutron could not make is deleted again with any made here before it throws.
   * @throws PortBindingFailedError, NeutronError
   */
  async prepareHere(instanceUuid: string, portIds: readonly string[], preserved: ReadonlySet<string>): Promise<NetworkInfo> {
    const neutron = this.o.neutron;
    const host = this.o.host;
    const made: string[] = [];
    const bound: NeutronPort[] = [];
    try {
      for (const id of portIds) {
        const port = await neutron.getPort(id);
        const binding = await this.bindingHere(port, made);
        if (binding.vif_type === 'binding_failed' || binding.vif_type === 'unbound') throw new PortBindingFailedError(id, host, binding.vif_type);
        let current = port;
        if (port['binding:profile']['migrating_to'] !== host) {
          current = await neutron.updatePort(id, { 'binding:profile': { ...port['binding:profile'], migrating_to: host } });
        }
        bound.push(asBoundHere(current, binding));
      }
    } catch (e) {
      for (const id of made) await neutron.deleteBinding(id, host).catch(() => false);
      throw e;
    }
    this.o.logger.info({ instance: instanceUuid, ports: portIds, made }, 'ports bound to this host for an incoming live migration (inactive until the move ends)');
    return vifsFor(neutron, bound, preserved);
  }

  /**
   * Source, the guest running at `dest`: each port's binding to `dest` activated (the source's
   * becomes INACTIVE). An already active one (a retry) is fine.
   * @throws NeutronError (a binding missing at `dest`: NeutronNotFoundError)
   */
  async activate(instanceUuid: string, portIds: readonly string[], dest: string): Promise<void> {
    for (const id of portIds) {
      const binding = await this.o.neutron.getBinding(id, dest);
      if (binding.status === 'ACTIVE') continue;
      await this.o.neutron.activateBinding(id, dest).catch((e: unknown) => {
        if (!(e instanceof NeutronConflictError)) throw e; // 409: activated meanwhile
      });
    }
    this.o.logger.info({ instance: instanceUuid, ports: portIds, host: dest }, 'port bindings activated on the live migration destination');
  }

  /** Destination, after the move: `migrating_to` out of each port's profile. @throws NeutronError */
  async settleHere(portIds: readonly string[]): Promise<void> {
    for (const id of portIds) await this.dropMigratingTo(id);
  }

  /**
   * Either side, on rollback: each port's binding to `dest` deleted while INACTIVE (an ACTIVE one
   * means the move happened, and stays), and `migrating_to` out of its profile. Failures are
   * logged, never thrown: the guest runs on the source whatever Neutron says.
   */
  async abandon(instanceUuid: string, portIds: readonly string[], dest: string): Promise<void> {
    const neutron = this.o.neutron;
    for (const id of portIds) {
      try {
        const binding = await neutron.getBinding(id, dest).catch((e: unknown) => {
          if (e instanceof NeutronNotFoundError) return undefined;
          throw e;
        });
        if (binding && binding.status !== 'ACTIVE') await neutron.deleteBinding(id, dest);
        await this.dropMigratingTo(id);
      } catch (e) {
        this.o.logger.warn({ instance: instanceUuid, port: id, host: dest, err: (e as Error).message }, "could not take back a port's live-migration binding");
      }
    }
  }

  /** `migrating_to` out of port `id`'s profile (no PUT when it has none). @throws NeutronError */
  private async dropMigratingTo(id: string): Promise<void> {
    const edit = profileWithout(await this.o.neutron.getPort(id), ['migrating_to']);
    if (edit['binding:profile']) await this.o.neutron.updatePort(id, edit);
  }

  /** This host's binding of `port`: the existing one, else a new INACTIVE one (its port id joins `made`). */
  private async bindingHere(port: NeutronPort, made: string[]): Promise<NeutronBinding> {
    const neutron = this.o.neutron;
    try {
      return await neutron.getBinding(port.id, this.o.host);
    } catch (e) {
      if (!(e instanceof NeutronNotFoundError)) throw e;
    }
    const profile = profileWithout(port, ['migrating_to'])['binding:profile'] ?? port['binding:profile'];
    const binding = await neutron.createBinding(port.id, { host: this.o.host, vnic_type: port['binding:vnic_type'], profile });
    made.push(port.id);
    return binding;
  }
}

/** `port` as it looks through this host's (inactive) binding: what the destination plugs (nova's `get_dest_vif`). */
function asBoundHere(port: NeutronPort, binding: NeutronBinding): NeutronPort {
  return {
    ...port,
    'binding:host_id': binding.host,
    'binding:vif_type': binding.vif_type,
    'binding:vif_details': binding.vif_details,
    'binding:vnic_type': binding.vnic_type,
    'binding:profile': binding.profile,
  };
}
