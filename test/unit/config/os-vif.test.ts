// [os_vif_ovs] and [qemu] network_namespace: defaults (Debian's ovsdb socket, the kernel
// datapath), values taken through to the driver's options, and one clear line per bad value.
import { qemuOptionsFromConfig } from '../../../virt-drivers/qemu/options';
import { configFromEnv, configProblems } from '../../helpers/config';

describe('[os_vif_ovs] and [qemu] network_namespace', () => {
  test("defaults: Debian's ovsdb socket, ovs-vsctl from PATH, 120 s, the system datapath, no namespace", () => {
    const o = qemuOptionsFromConfig(configFromEnv({}));
    expect(o.ovs).toEqual({ connection: 'unix:/run/openvswitch/db.sock', vsctl: 'ovs-vsctl', timeoutSec: 120, datapathType: 'system' });
    expect(o.netns).toBeUndefined();
  });

  test('set values reach the driver options', () => {
    const o = qemuOptionsFromConfig(
      configFromEnv({
        COMPUTE_AGENT__OS_VIF_OVS__OVSDB_CONNECTION: 'tcp:127.0.0.1:6640',
        COMPUTE_AGENT__OS_VIF_OVS__OVS_VSCTL: '/usr/local/bin/ovs-vsctl',
        COMPUTE_AGENT__OS_VIF_OVS__OVSDB_TIMEOUT: '7',
        COMPUTE_AGENT__OS_VIF_OVS__DATAPATH_TYPE: 'netdev',
        COMPUTE_AGENT__QEMU__NETWORK_NAMESPACE: 'host-b',
      }),
    );
    expect(o.ovs).toEqual({ connection: 'tcp:127.0.0.1:6640', vsctl: '/usr/local/bin/ovs-vsctl', timeoutSec: 7, datapathType: 'netdev' });
    expect(o.netns).toBe('host-b');
    expect(qemuOptionsFromConfig(configFromEnv({ COMPUTE_AGENT__OS_VIF_OVS__OVSDB_CONNECTION: 'unix:/tmp/x/db.sock' })).ovs.connection).toBe('unix:/tmp/x/db.sock');
  });

  test('bad values: one line each, naming the option and the expected form', () => {
    const lines = configProblems(() =>
      configFromEnv({
        COMPUTE_AGENT__OS_VIF_OVS__OVSDB_CONNECTION: '/run/openvswitch/db.sock',
        COMPUTE_AGENT__OS_VIF_OVS__OVSDB_TIMEOUT: '0',
        COMPUTE_AGENT__OS_VIF_OVS__DATAPATH_TYPE: 'Net Dev',
        COMPUTE_AGENT__QEMU__NETWORK_NAMESPACE: '../etc',
      }),
    );
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^os_vif_ovs\.ovsdb_connection = .*not an OVSDB remote.*unix:<absolute path>/),
        expect.stringMatching(/^os_vif_ovs\.ovsdb_timeout = .*must be >= 1/),
        expect.stringMatching(/^os_vif_ovs\.datapath_type = .*not a datapath type/),
        expect.stringMatching(/^qemu\.network_namespace = .*not a network namespace name/),
      ]),
    );
    expect(lines).toHaveLength(4);
  });
});
