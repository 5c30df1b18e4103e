/**
 * The fake driver's VIF plugging: a table of the ports "plugged" on this host, so the compute
 * manager's tests can assert what a build, a move or a delete plugged and unplugged, with the
 * same refusals a real host makes (only `ovs` VIFs plug; `binding_failed`, `unbound` and others
 * fail with `VifTypeNotSupportedError`).
 *
 * It is: in memory, like the fake hypervisor's taps would be (gone with the process, as real taps
 * are gone after a host reboot). It is not: a real plugger; nothing on the host changes.
 */
import type { NetworkInfo, Vif } from '../../model/network';
import { VifTypeNotSupportedError } from '../net/errors';
import type { VifPlugger } from '../net/plugger';
import type { InstanceRef } from '../types';
import type { FakeHypervisor } from './hypervisor';

/** One plugged port. */
export interface FakePlugged {
  readonly instance: string;
  readonly vif: Vif;
}

export class FakeVifs implements VifPlugger {
  /** Plugged ports by port id. */
  readonly plugged = new Map<string, FakePlugged>();
  /** Every plug and unplug, in order (`plug <port>`, `unplug <port>`), for tests. */
  readonly history: string[] = [];

  /** @throws VifTypeNotSupportedError */
  check(vifs: NetworkInfo): void {
    for (const v of vifs) if (v.type !== 'ovs') throw new VifTypeNotSupportedError(v.id, v.type);
  }

  async plug(vif: Vif, instanceUuid: string): Promise<void> {
    this.check([vif]);
    if (this.plugged.get(vif.id)?.instance === instanceUuid) return;
    this.plugged.set(vif.id, { instance: instanceUuid, vif });
    this.history.push(`plug ${vif.id}`);
  }

  async unplug(vif: Vif): Promise<void> {
    if (this.plugged.delete(vif.id)) this.history.push(`unplug ${vif.id}`);
  }

  /** Plugs all (checked first, so a bad one plugs none). */
  async plugAll(instanceUuid: string, vifs: NetworkInfo): Promise<void> {
    this.check(vifs);
    for (const v of vifs) await this.plug(v, instanceUuid);
  }

  async unplugAll(vifs: NetworkInfo): Promise<void> {
    for (const v of vifs) await this.unplug(v);
  }

  /** The ports plugged for an instance. */
  of(instanceUuid: string): string[] {
    return [...this.plugged.values()].filter((p) => p.instance === instanceUuid).map((p) => p.vif.id);
  }
}

/** The fake instances' NIC lists kept in step with the plugging (attach, detach, a newer binding). */
export class FakeNics {
  constructor(
    private readonly hypervisor: FakeHypervisor,
    private readonly vifs: FakeVifs,
  ) {}

  /** Plugs; an instance here takes the given VIFs' newer binding details. */
  async plugVifs(instance: InstanceRef, vifs: NetworkInfo): Promise<void> {
    await this.vifs.plugAll(instance.uuid, vifs);
    const i = this.hypervisor.find(instance.uuid);
    if (i?.vifs) i.vifs = i.vifs.map((v) => vifs.find((n) => n.id === v.id) ?? v);
    await this.hypervisor.save();
  }

  async attach(instance: InstanceRef, vif: Vif): Promise<void> {
    const i = this.hypervisor.settled(instance, 'attach an interface');
    if (i.vifs?.some((v) => v.id === vif.id)) return;
    await this.vifs.plug(vif, instance.uuid);
    i.vifs = [...(i.vifs ?? []), vif];
    await this.hypervisor.save();
  }

  async detach(instance: InstanceRef, vif: Vif): Promise<void> {
    const i = this.hypervisor.settled(instance, 'detach an interface');
    await this.vifs.unplug(i.vifs?.find((v) => v.id === vif.id) ?? vif);
    i.vifs = (i.vifs ?? []).filter((v) => v.id !== vif.id);
    await this.hypervisor.save();
  }
}
