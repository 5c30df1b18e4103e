// The net guest (scripts/net-guest, docs/net-guest.md) on a private network of namespaces: booted
// under QEMU TCG with the qemu driver's own command line plus a virtio-net NIC on a tap, bridged to
// a namespace where udhcpd hands out fixed addresses by MAC and an MTU of 1442. Proves the guest
// takes exactly the lease it was given (address, prefix, router, MTU as the guest's kernel applied
// it, MAC), prints it on its serial console, and answers ping from the DHCP side: once booted from
// its qcow2 disk (what Glance will hold), once from its kernel and initramfs directly.
//
// Needs root, qemu-system-x86 and qemu-utils; the script installs the rest and caches the image, so
// only the first run downloads the kernel package. Skipped, saying why, where that is missing.
import { initUptime, leases, netGuestUnavailableReason, buildNetGuest, type NetGuestFiles } from '../../helpers/net-guest';
import { LAB_GATEWAY, type LabGuest, NetLab } from '../../helpers/net-lab';

const MTU = 1442;
const FIRST = { mac: '52:54:00:4e:47:01', ip: '10.77.0.42' };
const SECOND = { mac: '52:54:00:4e:47:02', ip: '10.77.0.43' };
/** Boot to lease under TCG on a busy 2-core machine; about 7 s when it is idle. */
const LEASE_DEADLINE_MS = 120000;

const unavailable = netGuestUnavailableReason();
if (unavailable) console.log(`net guest test skipped: ${unavailable}`);
const suite = unavailable ? describe.skip : describe;

suite('the net guest on a bridged tap with a DHCP server', () => {
  let files: NetGuestFiles;
  let lab: NetLab | undefined;
  let passed = 0;
  const timings: string[] = [];

  beforeAll(async () => {
    files = buildNetGuest();
    timings.push(`image build/lookup ${files.seconds.toFixed(1)} s (${files.progress.trim().split('\n').at(-1) ?? ''})`);
    lab = new NetLab({ mtu: MTU, staticLeases: [FIRST, SECOND] });
    await lab.start();
  }, 15 * 60 * 1000);

  afterAll(async () => {
    // A failed test's consoles and logs stay behind for a look (the namespaces and processes never do).
    const keep = passed < 3;
    if (lab) {
      if (keep) timings.push(`files kept in ${lab.dir}`);
      await lab.cleanup(keep);
    }
    console.log(`net guest: ${timings.join('; ')}`);
  });

  test(
    'booted from its qcow2 disk as the qemu driver boots an image: the fixed lease with the MTU on the console, and it answers ping',
    async () => {
      const l = lab as NetLab;
      // Nothing answers at the address before the guest runs: the replies below are the guest's.
      expect(l.ping(FIRST.ip, 1).received).toBe(0);

      const guest = l.bootGuest('disk-guest', FIRST.mac, { kind: 'disk', image: files.image });
      const got = await l.waitForLease(guest, LEASE_DEADLINE_MS);
      timings.push(`disk boot to lease ${got.seconds.toFixed(1)} s (guest /init at ${String(initUptime(got.console))} s uptime)`);

      expect(got.lease).toEqual({ ip: FIRST.ip, prefix: 24, router: LAB_GATEWAY, mtu: MTU, mac: FIRST.mac });
      const ping = l.ping(FIRST.ip, 3);
      expect({ received: ping.received, output: ping.output }).toEqual({ received: 3, output: expect.any(String) });
      // No second, different lease was printed meanwhile.
      expect(new Set(leases(l.consoleOf(guest)).map((x) => x.ip))).toEqual(new Set([FIRST.ip]));
      passed++;
    },
    LEASE_DEADLINE_MS + 30000,
  );

  test(
    'booted from its kernel and initramfs: a second guest takes its own fixed lease on the same bridge, both answer ping',
    async () => {
      const l = lab as NetLab;
      expect(l.ping(SECOND.ip, 1).received).toBe(0);

      const guest = l.bootGuest('kernel-guest', SECOND.mac, { kind: 'kernel', kernel: files.kernel, initrd: files.initrd, cmdline: files.cmdline });
      const got = await l.waitForLease(guest, LEASE_DEADLINE_MS);
      timings.push(`direct kernel boot to lease ${got.seconds.toFixed(1)} s (guest /init at ${String(initUptime(got.console))} s uptime)`);

      expect(got.lease).toEqual({ ip: SECOND.ip, prefix: 24, router: LAB_GATEWAY, mtu: MTU, mac: SECOND.mac });
      expect(l.ping(SECOND.ip, 3).received).toBe(3);
      expect(l.ping(FIRST.ip, 1).received).toBe(1);
      passed++;
    },
    LEASE_DEADLINE_MS + 30000,
  );

  test('the ACPI power button (system_powerdown, the driver\'s clean stop) powers the guest off, and its address goes silent', async () => {
    const l = lab as NetLab;
    const guest = l.guests.find((g) => g.name === 'disk-guest');
    expect(guest).toBeDefined();
    const off = await l.powerDown(guest as LabGuest, 30000);
    timings.push(`power button to QEMU exit ${off.seconds.toFixed(1)} s`);
    expect(off.code).toBe(0);
    expect(l.consoleOf(guest as LabGuest)).toContain('net-guest: power button; powering off');
    expect(l.ping(FIRST.ip, 1).received).toBe(0);
    // The other guest, on the same bridge, is unaffected.
    expect(l.ping(SECOND.ip, 1).received).toBe(1);
    passed++;
  }, 60000);
});
