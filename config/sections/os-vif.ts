/**
 * The `[os_vif_ovs]` section: how the virt drivers plug VIFs into Open vSwitch, with os-vif's
 * option names (`ovsdb_connection`, `ovsdb_timeout`) where os-vif has them.
 *
 * It is: declarations only (`virt-drivers/net/` reads them). It is not: Neutron's or OVN's
 * configuration; the bridge and datapath of a port come from its binding (`vif_details`), the
 * options here are the fallbacks and the way to the local ovsdb-server.
 */
import { z } from 'zod';
import { int, nonEmpty, option } from '../types';

/** An OVSDB remote: `unix:<absolute path>`, or `tcp:`/`ssl:` `<ip>:<port>`. */
const ovsdbRemote = (): z.ZodType<string, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (/^unix:\/\S+$/.test(v) || /^(tcp|ssl):(\[[0-9a-fA-F:.]+\]|[0-9.]+|[A-Za-z0-9.-]+):\d{1,5}$/.test(v)) return v;
    ctx.addIssue({ code: 'custom', message: 'not an OVSDB remote' });
    return z.NEVER;
  });

/** An OVS `datapath_type`: `system`, `netdev`, or another lowercase name. */
const datapathType = (): z.ZodType<string, string> =>
  z.string().transform((raw, ctx) => {
    const v = raw.trim();
    if (/^[a-z][a-z0-9_-]*$/.test(v)) return v;
    ctx.addIssue({ code: 'custom', message: 'not a datapath type' });
    return z.NEVER;
  });

export const osVifOvsSection = z.object({
  ovsdb_connection: option(ovsdbRemote(), {
    help:
      "The local ovsdb-server the VIFs' ports are written to (ovs-vsctl --db). The default is where Debian's " +
      'openvswitch-switch listens; os-vif\'s own default is tcp:127.0.0.1:6640.',
    default: 'unix:/run/openvswitch/db.sock',
    expected: 'unix:<absolute path>, or tcp:<ip>:<port> / ssl:<ip>:<port>',
  }),
  ovs_vsctl: option(nonEmpty(), {
    help: 'The ovs-vsctl binary, a path or a name looked up in PATH.',
    default: 'ovs-vsctl',
    expected: 'an executable name or path',
  }),
  ovsdb_timeout: option(int(1), {
    help: 'Seconds an ovs-vsctl command may take (it waits for ovs-vswitchd to apply a change) before plugging fails.',
    default: '120',
    expected: 'an integer >= 1 (seconds)',
  }),
  datapath_type: option(datapathType(), {
    help:
      "The bridge datapath when a port's binding gives none (vif_details datapath_type): system for the kernel " +
      'module, netdev for the userspace datapath (hosts without the openvswitch module).',
    default: 'system',
    expected: 'system, netdev, or another OVS datapath type',
  }),
});

/** The validated `[os_vif_ovs]` section. */
export type OsVifOvsSection = z.output<typeof osVifOvsSection>;
