/**
 * Where a running guest's consoles listen, read from its QEMU: the VNC server (`query-vnc`) and
 * the serial port's TCP socket (`query-chardev`). QEMU chose both ports when it started (the first
 * free one of a range), so they are read, never remembered: an agent restarted beside running
 * guests answers the same.
 *
 * It is: the driver's `getConsole`. It is not: the sockets' options (`cmdline.ts`), nor the
 * token and URL nova's proxies need (`agent/compute/consoles.ts`).
 */
import type { ConsoleEndpoint, ConsoleKind } from '../driver';
import { ConsoleUnavailableError, InstanceStateError } from '../errors';
import type { InstanceRef } from '../types';
import type { QemuHost } from './context';
import { activeInstance } from './lifecycle';

/** The port of a socket chardev's `filename` (`disconnected:tcp:127.0.0.1:10000,server=on`, `tcp:[::1]:10000,server=on <-> ...`). */
export function chardevTcpPort(filename: string): number | undefined {
  const m = /(?:^|:)tcp:(?:\[[^\]]*\]|[^:,\s]+):(\d{1,5})(?:,|$|\s)/.exec(filename);
  return m ? Number(m[1]) : undefined;
}

/** @throws InstanceNotFoundError, InstanceStateError (no running QEMU), ConsoleUnavailableError */
export async function getConsole(host: QemuHost, ref: InstanceRef, kind: ConsoleKind): Promise<ConsoleEndpoint> {
  const m = activeInstance(host, ref);
  const vm = m.vm;
  if (!vm || !(await vm.alive())) throw new InstanceStateError(ref.uuid, await host.table.powerState(m), `open its ${kind} console`);
  const { vnc, serial } = host.opts.consoles;
  if (kind === 'vnc') {
    if (!vnc) throw new ConsoleUnavailableError(ref.uuid, kind, '[vnc] enabled is false on this host');
    const info = (await vm.execute('query-vnc')) as { enabled?: unknown; service?: unknown };
    const port = info.enabled === true && typeof info.service === 'string' ? Number(info.service) : NaN;
    if (!Number.isInteger(port) || port <= 0) {
      const why = m.rec.vm.video === undefined ? 'the guest has no display (it was built where [vnc] was off)' : 'its QEMU runs no VNC server (started while [vnc] was off; it gets one at its next start)';
      throw new ConsoleUnavailableError(ref.uuid, kind, why);
    }
    return { host: vnc.proxyclientAddress, port };
  }
  if (!serial) throw new ConsoleUnavailableError(ref.uuid, kind, '[serial_console] enabled is false on this host');
  const chardevs = (await vm.execute('query-chardev')) as readonly { label?: unknown; filename?: unknown }[];
  const chardev = chardevs.find((c) => c.label === 'charserial0');
  const port = typeof chardev?.filename === 'string' ? chardevTcpPort(chardev.filename) : undefined;
  if (port === undefined) throw new ConsoleUnavailableError(ref.uuid, kind, 'its serial port logs to a file only (started while [serial_console] was off; it gets a socket at its next start)');
  return { host: serial.address, port };
}
