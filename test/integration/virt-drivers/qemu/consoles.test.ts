// A guest's consoles with real QEMU (TCG, the tick guest), as nova's proxies reach them: with
// [serial_console] on, the serial port is a TCP server on the first free port of its range whose
// client reads what the guest prints, while the console log still gets every line; with [vnc] on
// (nova's default), the guest has a display and a VNC server that greets a client with RFB. Two
// guests get two ports of each; an agent restarted beside them reads the same ports from QEMU. A
// host with [vnc] off builds guests without a display and says so.
import { connect } from 'node:net';
import { ConsoleUnavailableError, InstanceStateError } from '../../../../virt-drivers/errors';
import { lastTick } from '../../../helpers/tick-guest';
import { consolePath, describeWithQemu, instanceSpec, QemuTestBed, waitTick, type TestHost } from '../../../helpers/qemu-hosts';

const UUID = ['c0000001-1111-4111-8111-111111111111', 'c0000002-2222-4222-8222-222222222222', 'c0000003-3333-4333-8333-333333333333'] as const;
const ref = (uuid: string) => ({ uuid, name: '' });

/** Connects to host:port and collects what arrives until `done` says enough (or `ms` pass). */
function readFrom(host: string, port: number, done: (text: string) => boolean, ms = 15000): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const socket = connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`${host}:${port}: only ${JSON.stringify(text.slice(-80))} within ${ms} ms`));
    }, ms);
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (done(text)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(text);
      }
    });
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

describeWithQemu('qemu driver: consoles', () => {
  let bed: QemuTestBed;
  let a: TestHost;
  let off: TestHost;

  beforeAll(async () => {
    bed = new QemuTestBed();
    a = bed.host('host-con', { 'serial_console.enabled': 'true', 'serial_console.port_range': '10000:20000' });
    off = bed.host('host-novnc', { 'vnc.enabled': 'false' });
    await a.driver.init('host-con');
    await off.driver.init('host-novnc');
  });
  afterAll(async () => {
    await a.driver.cleanupHost('host-con');
    await off.driver.cleanupHost('host-novnc');
    bed.cleanup();
  });

  test('serial: a TCP client reads the guest printing, the console log gets it too; VNC: RFB greets the client; two guests, two ports', async () => {
    const t0 = Date.now();
    await a.driver.spawn(instanceSpec(UUID[0], { image: 'tick.img' }));
    await waitTick(consolePath(a, UUID[0]), 0);
    process.stdout.write(`consoles: spawn to the first tick with a display and a VNC server: ${Date.now() - t0} ms\n`);
    await a.driver.spawn(instanceSpec(UUID[1], { image: 'tick.img' }));

    const serial = await a.driver.getConsole(ref(UUID[0]), 'serial');
    const vnc = await a.driver.getConsole(ref(UUID[0]), 'vnc');
    expect(serial.host).toBe('127.0.0.1');
    expect(serial.port).toBeGreaterThanOrEqual(10000);
    expect(vnc.host).toBe('127.0.0.1');
    expect(vnc.port).toBeGreaterThanOrEqual(5900);

    const seen = await readFrom(serial.host, serial.port, (t) => /tick [0-9a-f]{4}\n/.test(t));
    const tick = parseInt(/tick ([0-9a-f]{4})\n/.exec(seen)?.[1] ?? '', 16);
    // The same lines reach the log while a client reads them.
    await waitTick(consolePath(a, UUID[0]), tick);
    expect(await readFrom(vnc.host, vnc.port, (t) => t.length >= 12)).toBe('RFB 003.008\n');

    const serial2 = await a.driver.getConsole(ref(UUID[1]), 'serial');
    const vnc2 = await a.driver.getConsole(ref(UUID[1]), 'vnc');
    expect(serial2.port).not.toBe(serial.port);
    expect(vnc2.port).not.toBe(vnc.port);
    await readFrom(serial2.host, serial2.port, (t) => /tick [0-9a-f]{4}\n/.test(t));

    // An agent restarted beside the running guests reads the same ports from their QEMUs.
    await a.driver.cleanupHost('host-con'); // the agent stops; its VMs do not
    a.restart();
    await a.driver.init('host-con');
    await expect(a.driver.getConsole(ref(UUID[0]), 'serial')).resolves.toEqual(serial);
    await expect(a.driver.getConsole(ref(UUID[1]), 'vnc')).resolves.toEqual(vnc2);

    // A stopped guest has no console.
    await a.driver.powerOff(ref(UUID[1]), { timeoutSec: 0 });
    await expect(a.driver.getConsole(ref(UUID[1]), 'serial')).rejects.toThrow(InstanceStateError);
    expect(lastTick(consolePath(a, UUID[0]))).toBeGreaterThanOrEqual(tick);
    await a.driver.destroy(ref(UUID[0]));
    await a.driver.destroy(ref(UUID[1]));
  });

  test('[vnc] off: the guest is built without a display, its VNC console is unavailable, and so is a serial console never switched on', async () => {
    const t0 = Date.now();
    await off.driver.spawn(instanceSpec(UUID[2], { image: 'tick.img' }));
    await waitTick(consolePath(off, UUID[2]), 0);
    process.stdout.write(`consoles: spawn to the first tick without a display: ${Date.now() - t0} ms\n`);
    await expect(off.driver.getConsole(ref(UUID[2]), 'vnc')).rejects.toThrow(ConsoleUnavailableError);
    await expect(off.driver.getConsole(ref(UUID[2]), 'vnc')).rejects.toThrow('[vnc] enabled is false on this host');
    await expect(off.driver.getConsole(ref(UUID[2]), 'serial')).rejects.toThrow('[serial_console] enabled is false on this host');
    await off.driver.destroy(ref(UUID[2]));
  });
});
