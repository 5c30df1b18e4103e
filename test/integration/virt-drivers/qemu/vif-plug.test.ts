// The qemu driver's VIFs with real QEMU (TCG, the tick guest) on a private Open vSwitch
// (userspace datapath) inside a network namespace this test creates, as one simulated compute
// host with [qemu] network_namespace: spawn plugs an ML2/OVN-style VIF (persistent tap at the MTU
// on a netdev br-int with os-vif's external_ids) and keeps the guest paused until beforeRun
// resolves; QEMU (run in the namespace) holds the tap with virtio-net and the port's MAC; destroy
// leaves no tap and no port; a rejecting beforeRun leaves nothing; hot attach on a running guest,
// a detach the guest cannot acknowledge, a cold detach.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DriverError } from '../../../../virt-drivers/errors';
import { lastTick } from '../../../helpers/tick-guest';
import { consolePath, describeWithQemu, instanceSpec, logged, processAlive, QemuTestBed, qemuPid, waitTick, type TestHost } from '../../../helpers/qemu-hosts';
import { HAVE_OVS, PrivateOvs } from '../../../helpers/private-ovs';
import { ovsVif } from '../../../helpers/vifs';

const UUID = ['a1111111-1111-4111-8111-111111111111', 'a2222222-2222-4222-8222-222222222222', 'a3333333-3333-4333-8333-333333333333'] as const;
const PORT = ['p1111111-aaaa-4aaa-8aaa-aaaaaaaaaaa1', 'p2222222-bbbb-4bbb-8bbb-bbbbbbbbbbb2', 'p3333333-cccc-4ccc-8ccc-ccccccccccc3'] as const;
const MAC = ['fa:16:3e:00:00:01', 'fa:16:3e:00:00:02', 'fa:16:3e:00:00:03'] as const;
const tap = (port: string): string => `tap${port}`.slice(0, 14);

const describeIt = HAVE_OVS ? describeWithQemu : (name: string, _fn: () => void): void => describe(name, () => test.skip('openvswitch-switch not installed or not root: apt-get install openvswitch-switch', () => undefined));

describeIt('qemu driver: VIFs on a private userspace Open vSwitch in a network namespace', () => {
  let ovs: PrivateOvs;
  let bed: QemuTestBed;
  let a: TestHost;

  beforeAll(async () => {
    const t0 = Date.now();
    ovs = PrivateOvs.start();
    console.log(`private OVS up in ${Date.now() - t0} ms`);
    bed = new QemuTestBed();
    a = bed.host('vif-host', { 'qemu.network_namespace': ovs.netns, 'os_vif_ovs.ovsdb_connection': ovs.db, 'os_vif_ovs.ovsdb_timeout': '20' });
    await a.driver.init('vif-host');
  });
  afterAll(async () => {
    await a?.driver.cleanupHost('vif-host');
    bed?.cleanup();
    ovs?.stop();
  });

  test('spawn plugs the VIF and holds the guest paused until beforeRun resolves; QEMU has virtio-net on the tap; destroy unplugs', async () => {
    const uuid = UUID[0];
    const vif = ovsVif(PORT[0], MAC[0]);
    const seen: Record<string, unknown> = {};
    const t0 = Date.now();
    let beforeRunAt = 0;
    await a.driver.spawn(
      { ...instanceSpec(uuid, { image: 'tick.img' }), network_info: [vif] },
      {
        beforeRun: async () => {
          beforeRunAt = Date.now();
          const qmp = await a.driver.monitor({ uuid, name: '' });
          seen.status = await qmp.execute('query-status');
          seen.tap = ovs.link(tap(PORT[0]));
          seen.ids = ovs.externalIds(tap(PORT[0]));
          await new Promise((r) => setTimeout(r, 1500)); // a running tick guest prints within ~1 s
          seen.ticksWhilePaused = lastTick(consolePath(a, uuid));
          seen.info = await a.driver.getInfo({ uuid, name: '' });
        },
      },
    );
    const spawnMs = Date.now() - t0;
    expect(seen.status).toMatchObject({ status: 'prelaunch', running: false });
    expect(seen.ticksWhilePaused).toBeUndefined();
    expect(seen.info).toMatchObject({ powerState: 'PAUSED' });
    expect(seen.tap).toMatchObject({ ifname: tap(PORT[0]), mtu: 1442 });
    expect((seen.tap as { flags: string[] }).flags).toContain('UP');
    expect(seen.ids).toEqual({ 'iface-id': PORT[0], 'iface-status': 'active', 'attached-mac': MAC[0], 'vm-uuid': uuid });

    // Resumed: the guest runs, QEMU holds the tap with the MAC, OVS reads it (an ofport, no error).
    await waitTick(consolePath(a, uuid), 1);
    const qmp = await a.driver.monitor({ uuid, name: '' });
    expect(await qmp.execute('query-status')).toMatchObject({ status: 'running' });
    const rx = (await qmp.execute('query-rx-filter', { name: 'net0' })) as Array<{ 'main-mac': string }>;
    expect(rx[0]?.['main-mac']).toBe(MAC[0]);
    const info = String(await qmp.execute('human-monitor-command', { 'command-line': 'info network' }));
    expect(info).toContain(`hostnet0: index=0,type=tap,ifname=${tap(PORT[0])},script=no,downscript=no`);
    expect(info).toMatch(/net0: index=0,type=nic,model=virtio-net-pci,macaddr=fa:16:3e:00:00:01/);
    expect(ovs.vsctl(['get', 'Bridge', 'br-int', 'datapath_type'])).toBe('netdev');
    expect(ovs.vsctl(['list-ports', 'br-int']).split('\n')).toContain(tap(PORT[0]));
    expect(Number(ovs.vsctl(['get', 'Interface', tap(PORT[0]), 'ofport']))).toBeGreaterThan(0);
    expect(ovs.vsctl(['get', 'Interface', tap(PORT[0]), 'error'])).toBe('[]');
    expect(ovs.link(tap(PORT[0]))?.flags).toContain('LOWER_UP'); // QEMU holds it (carrier)

    await a.driver.destroy({ uuid, name: '' });
    expect(ovs.link(tap(PORT[0]))).toBeUndefined();
    expect(ovs.vsctl(['list-ports', 'br-int'])).toBe('');
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);
    console.log(`spawn with one VIF, plug + paused start: ${beforeRunAt - t0} ms; whole spawn (1.5 s beforeRun) ${spawnMs} ms`);
  });

  test('a rejecting beforeRun: the same error comes back, and no QEMU, tap, OVS port or directory is left', async () => {
    const uuid = UUID[1];
    const boom = new Error('network-vif-plugged timed out');
    let pid: number | undefined;
    const err = await a.driver
      .spawn(
        { ...instanceSpec(uuid, { image: 'tick.img' }), network_info: [ovsVif(PORT[1], MAC[1])] },
        {
          beforeRun: async () => {
            pid = qemuPid(a, uuid);
            expect(ovs.link(tap(PORT[1]))).toBeDefined();
            throw boom;
          },
        },
      )
      .catch((e: unknown) => e);
    expect(err).toBe(boom);
    expect(pid).toBeGreaterThan(0);
    expect(processAlive(pid)).toBe(false);
    expect(ovs.link(tap(PORT[1]))).toBeUndefined();
    expect(ovs.vsctl(['list-ports', 'br-int'])).toBe('');
    expect(existsSync(join(a.instancesPath, uuid))).toBe(false);
    expect(await a.driver.listInstances()).toEqual([]);
  });

  test('hot attach to a running guest; a detach the guest never acknowledges fails and keeps the NIC; powered off, detach unplugs it', async () => {
    const uuid = UUID[2];
    const ref = { uuid, name: '' };
    const vif = ovsVif(PORT[2], MAC[2], { mtu: 1400 });
    await a.driver.spawn(instanceSpec(uuid, { image: 'tick.img' }));
    await waitTick(consolePath(a, uuid), 1);
    const t0 = Date.now();
    await a.driver.attachInterface(ref, vif);
    const attachMs = Date.now() - t0;
    await a.driver.attachInterface(ref, vif); // idempotent
    const qmp = await a.driver.monitor(ref);
    const rx = (await qmp.execute('query-rx-filter', { name: 'net0' })) as Array<{ 'main-mac': string }>;
    expect(rx[0]?.['main-mac']).toBe(MAC[2]);
    expect(ovs.link(tap(PORT[2]))).toMatchObject({ mtu: 1400 });
    expect(ovs.externalIds(tap(PORT[2]))['iface-id']).toBe(PORT[2]);
    expect(ovs.link(tap(PORT[2]))?.flags).toContain('LOWER_UP');

    // The tick guest has no OS to answer the hot-unplug request: the detach must fail, not lie.
    const d0 = Date.now();
    const err = await a.driver.detachInterface(ref, vif).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DriverError);
    expect((err as Error).message).toMatch(/did not release NIC net0 .* within 15000 ms of requests/);
    expect(logged(a, 'the guest has not released the NIC yet: asking again').map((l) => l['attempt'])).toEqual([2, 3]);
    console.log(`hot attach ${attachMs} ms; unacknowledged detach gave up after ${Date.now() - d0} ms`);
    expect(ovs.link(tap(PORT[2]))).toBeDefined();

    // Powered off, the NIC stays in the definition: power on starts QEMU with it (tap plugged again).
    await a.driver.powerOff(ref, { timeoutSec: 0 });
    await a.driver.unplugVifs(ref, [vif]); // as after a host reboot: the tap is gone
    expect(ovs.link(tap(PORT[2]))).toBeUndefined();
    await a.driver.powerOn(ref);
    expect(ovs.link(tap(PORT[2]))).toMatchObject({ mtu: 1400 });
    const rx2 = (await (await a.driver.monitor(ref)).execute('query-rx-filter', { name: 'net0' })) as Array<{ 'main-mac': string }>;
    expect(rx2[0]?.['main-mac']).toBe(MAC[2]);

    await a.driver.powerOff(ref, { timeoutSec: 0 });
    await a.driver.detachInterface(ref, vif);
    expect(ovs.link(tap(PORT[2]))).toBeUndefined();
    expect(ovs.vsctl(['list-ports', 'br-int'])).toBe('');
    await a.driver.powerOn(ref);
    await expect((await a.driver.monitor(ref)).execute('query-rx-filter', { name: 'net0' })).rejects.toThrow();
    await a.driver.destroy(ref);
  });
});
