/**
 * VIF plugging, after os-vif's `ovs` plugin: what a compute host does to a Neutron port before a
 * guest uses it, and undoes after.
 *
 * - `ovs`, not hybrid (ML2/OVN, ML2/OVS with the openvswitch firewall): a persistent kernel tap
 *   (`tap<port>`) at the network's MTU, up, added as a plain port to the bridge (`br-int`) with
 *   the interface's `external_ids` (`iface-id`, `iface-status`, `attached-mac`, `vm-uuid`) that
 *   ovn-controller or the OVS agent claim the port by. On a userspace-datapath OVS (no kernel
 *   module) this is the only shape that works: OVS reads the tap over AF_PACKET while QEMU holds
 *   its fd (`-netdev tap,ifname=`); an OVS `type=tap`/`internal` port would take the fd itself.
 * - `ovs` with `ovs_hybrid_plug` (ML2/OVS with iptables_hybrid): Linux bridge `qbr<port>`, veth
 *   `qvb<port>` (on qbr) / `qvo<port>` (on OVS, with the external_ids), and the tap on qbr.
 * - anything else (`binding_failed`, `unbound`, `vhostuser`, ...): `VifTypeNotSupportedError`.
 *
 * Everything is idempotent: plugging checks what exists, OVS writes use may-exist/if-exists,
 * unplugging a VIF that is not plugged is fine. Unplugging does not look at the VIF type (a port
 * whose binding failed after it was plugged still has its tap removed).
 *
 * It is: the `VifPlugger` port and its OVS implementation over the `HostLinks` and `OvsDb` ports.
 * It is not: QEMU's side (the driver opens the tap) nor Neutron (the agent binds ports).
 */
import { hybridName, tapName, vifBridge, vifMtu, type Vif } from '../../model/network';
import { VifPlugError, VifTypeNotSupportedError } from './errors';
import type { Exec } from '../host/exec';
import { IpLinks, type HostLinks } from './links';
import { VsctlOvsDb, type OvsDb } from './ovsdb';

/** Plugs and unplugs VIFs on this host. Both are idempotent. */
export interface VifPlugger {
  /** Creates what the VIF needs here. @throws VifTypeNotSupportedError, VifPlugError */
  plug(vif: Vif, instanceUuid: string): Promise<void>;
  /** Removes what `plug` created; absent parts are fine. @throws VifPlugError */
  unplug(vif: Vif): Promise<void>;
}

/** The tap QEMU opens for a VIF: nova's `devname`, else `tap` + the port uuid cut to 14. */
export function vifTap(vif: Vif): string {
  return vif.devname && vif.devname.length <= 15 ? vif.devname : tapName(vif.id);
}

/** Whether the VIF is plugged through a Linux bridge (qbr/qvb/qvo). */
export function isHybrid(vif: Vif): boolean {
  return vif.details.ovs_hybrid_plug === true;
}

/** Runs one plugging step; its failure becomes a `VifPlugError` naming the port and the step. */
async function stepOf(port: string, name: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    throw new VifPlugError(port, name, { cause: e });
  }
}

/** The OVS plugger. */
export class OvsVifPlugger implements VifPlugger {
  constructor(
    private readonly links: HostLinks,
    private readonly ovs: OvsDb,
    /** `[os_vif_ovs] datapath_type`: used when the binding names none. */
    private readonly defaultDatapathType: string,
  ) {}

  async plug(vif: Vif, instanceUuid: string): Promise<void> {
    if (vif.type !== 'ovs') throw new VifTypeNotSupportedError(vif.id, vif.type);
    const tap = vifTap(vif);
    const mtu = vifMtu(vif);
    const bridge = vifBridge(vif);
    const datapath = typeof vif.details.datapath_type === 'string' && vif.details.datapath_type !== '' ? vif.details.datapath_type : this.defaultDatapathType;
    const step = (name: string, fn: () => Promise<unknown>): Promise<void> => stepOf(vif.id, name, fn);
    const mtuOpt = mtu === undefined ? {} : { mtu };
    const ensureTap = async (master?: string): Promise<void> => {
      if (!(await this.links.exists(tap))) await this.links.addTap(tap);
      await this.links.setUp(tap, { ...mtuOpt, ...(master === undefined ? {} : { master }) });
    };
    const externalIds = { 'iface-id': vif.ovs_interfaceid ?? vif.id, 'iface-status': 'active', 'attached-mac': vif.address, 'vm-uuid': instanceUuid };
    if (!isHybrid(vif)) {
      await step(`creating tap ${tap}`, () => ensureTap());
      await step(`creating OVS bridge ${bridge}`, () => this.ovs.ensureBridge(bridge, datapath));
      await step(`adding ${tap} to ${bridge}`, () => this.ovs.addPort(bridge, tap, externalIds));
      return;
    }
    const [qbr, qvb, qvo] = [hybridName('qbr', vif.id), hybridName('qvb', vif.id), hybridName('qvo', vif.id)];
    await step(`creating bridge ${qbr}`, async () => {
      if (!(await this.links.exists(qbr))) await this.links.addBridge(qbr);
      await this.links.setUp(qbr);
    });
    await step(`creating veth ${qvb}/${qvo}`, async () => {
      if (!(await this.links.exists(qvb))) await this.links.addVethPair(qvb, qvo);
      await this.links.setUp(qvb, { ...mtuOpt, master: qbr });
      await this.links.setUp(qvo, mtuOpt);
    });
    await step(`creating OVS bridge ${bridge}`, () => this.ovs.ensureBridge(bridge, datapath));
    await step(`adding ${qvo} to ${bridge}`, () => this.ovs.addPort(bridge, qvo, externalIds));
    await step(`creating tap ${tap} on ${qbr}`, () => ensureTap(qbr));
  }

  async unplug(vif: Vif): Promise<void> {
    const tap = vifTap(vif);
    const [qbr, qvb, qvo] = [hybridName('qbr', vif.id), hybridName('qvb', vif.id), hybridName('qvo', vif.id)];
    const step = (name: string, fn: () => Promise<unknown>): Promise<void> => stepOf(vif.id, name, fn);
    if (isHybrid(vif)) {
      await step(`removing ${qvo} from OVS`, () => this.ovs.deletePort(qvo));
      await step(`removing veth ${qvb}`, () => this.links.remove(qvb));
      await step(`removing tap ${tap}`, () => this.links.remove(tap));
      await step(`removing bridge ${qbr}`, () => this.links.remove(qbr));
      return;
    }
    await step(`removing ${tap} from OVS`, () => this.ovs.deletePort(tap));
    await step(`removing tap ${tap}`, () => this.links.remove(tap));
  }
}

/** Where and how the default plugger reaches the host: `[os_vif_ovs]` and `[qemu] network_namespace`. */
export interface OvsPluggingOptions {
  readonly connection: string;
  readonly vsctl: string;
  readonly timeoutSec: number;
  readonly datapathType: string;
  readonly netns?: string;
}

/** The OVS plugger on the real host: `ip` (in the namespace, if any) and `ovs-vsctl` through `exec`. */
export function defaultPlugger(exec: Exec, o: OvsPluggingOptions): VifPlugger {
  const links = new IpLinks(exec, { timeoutMs: 30_000, ...(o.netns === undefined ? {} : { netns: o.netns }) });
  return new OvsVifPlugger(links, new VsctlOvsDb(exec, { vsctl: o.vsctl, connection: o.connection, timeoutSec: o.timeoutSec }), o.datapathType);
}
