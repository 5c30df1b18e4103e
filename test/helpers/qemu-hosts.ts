/**
 * Two (or more) QEMU driver "hosts" on this machine for the integration tests: each with its own
 * instances_path and state_path under one temp directory, the tick guest's image shared in an
 * images directory, TCG pinned, VMs kept tiny (32 MiB, 1 vCPU).
 *
 * Also: waiting for serial ticks, an escape hatch to a VM's QMP connection, and `reapLeftovers`,
 * which kills every QEMU a test started under its temp directory, whatever the driver thinks, so
 * no test leaves a VM behind even when it fails.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, type Logger } from '../../lib/logging/logger';
import { systemClock } from '../../lib/clock';
import { loadConfig } from '../../config/loader';
import type { AgentConfig } from '../../config/schema';
import { ProcessExec } from '../../virt-drivers/host/exec';
import { RootedHostFs } from '../../virt-drivers/host/host-fs';
import { QemuDriver } from '../../virt-drivers/qemu/driver';
import type { HostRef, InstanceSpec, MigrationRef } from '../../virt-drivers/types';
import { lastTick, writeTickImage } from './tick-guest';

/** Whether QEMU is installed; without it the real-VM suites skip with a message. */
export const HAVE_QEMU = (() => {
  try {
    execFileSync('qemu-system-x86_64', ['--version'], { stdio: 'ignore' });
    execFileSync('qemu-img', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** `describe`, or a skip that says why (CI installs QEMU, so there it always runs). */
export function describeWithQemu(name: string, fn: () => void): void {
  if (HAVE_QEMU) {
    describe(name, fn);
    return;
  }
  describe(name, () => {
    test.skip('qemu-system-x86_64 / qemu-img not installed: apt-get install --no-install-recommends qemu-system-x86 qemu-utils', () => undefined);
  });
}

export interface TestHost {
  readonly name: string;
  readonly instancesPath: string;
  readonly config: AgentConfig;
  readonly ref: HostRef;
  readonly logLines: string[];
  readonly logger: Logger;
  driver: QemuDriver;
  /** A new driver on the same host (an agent restart). */
  restart(): QemuDriver;
}

export class QemuTestBed {
  readonly root = mkdtempSync(join(tmpdir(), 'qit-'));
  readonly images = join(this.root, 'images');
  readonly image = join(this.images, 'tick.img');

  constructor() {
    mkdirSync(this.images);
    writeTickImage(this.image);
  }

  /** A host named `name`; `overrides` are `section.key` -> raw value. */
  host(name: string, overrides: Readonly<Record<string, string>> = {}): TestHost {
    const base = join(this.root, name);
    const env: Record<string, string> = {};
    const set = (key: string, value: string): void => {
      const [section = '', option = ''] = key.split('.');
      env[`COMPUTE_AGENT__${section.toUpperCase()}__${option.toUpperCase()}`] = value;
    };
    set('DEFAULT.host', name);
    set('DEFAULT.state_path', join(base, 'state'));
    set('DEFAULT.instances_path', join(base, 'instances'));
    set('qemu.accel', 'tcg');
    set('qemu.images_path', this.images);
    set('qemu.shutdown_timeout', '1');
    set('qemu.wait_soft_reboot_seconds', '1');
    set('qemu.destroy_timeout', '5');
    // A guest that never releases a device (the tick guest) fails its detach in 3 × 5 s, not nova's 8 × 20 s.
    set('qemu.device_detach_attempts', '3');
    set('qemu.device_detach_timeout', '5');
    for (const [k, v] of Object.entries(overrides)) set(k, v);
    const { config } = loadConfig({ files: [], env, defaultFile: '/nonexistent/compute-agent.conf' });
    const logLines: string[] = [];
    const { logger } = createLogger({ level: 'debug', sink: { write: (l) => logLines.push(l) } });
    const make = (): QemuDriver => new QemuDriver({ config, logger, clock: systemClock, exec: new ProcessExec(), fs: new RootedHostFs('/') });
    const host: TestHost = {
      name,
      instancesPath: config.DEFAULT.instances_path,
      config,
      ref: { host: name, nodename: name, address: '127.0.0.1' },
      logLines,
      logger,
      driver: make(),
      restart: () => (host.driver = make()),
    };
    return host;
  }

  /** Kills every QEMU started under this bed and removes the directory. */
  cleanup(): void {
    reapLeftovers(this.root);
    rmSync(this.root, { recursive: true, force: true });
  }
}

/** SIGKILLs every qemu-system process whose command line mentions `root`. */
export function reapLeftovers(root: string): number {
  let killed = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let cmd = '';
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmd.includes('qemu-system') && cmd.includes(root)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
        killed++;
      } catch {
        /* gone */
      }
    }
  }
  return killed;
}

export function instanceSpec(uuid: string, opts: { image?: string; memoryMb?: number; rootGb?: number; name?: string } = {}): InstanceSpec {
  return {
    uuid,
    name: opts.name ?? `instance-${uuid.slice(0, 8)}`,
    flavor: { name: 'tiny', vcpus: 1, memory_mb: opts.memoryMb ?? 32, root_gb: opts.rootGb ?? 1, ephemeral_gb: 0, swap: 0, extra_specs: {} },
    ...(opts.image ? { image_ref: opts.image } : {}),
    allocations: {},
  };
}

export function migration(uuid: string, source: TestHost, dest: TestHost): MigrationRef {
  return { uuid, source: source.ref, dest: dest.ref };
}

export function consolePath(host: TestHost, uuid: string): string {
  return join(host.instancesPath, uuid, 'console.log');
}

/** The pid QEMU wrote for an instance of `host`. */
export function qemuPid(host: TestHost, uuid: string): number | undefined {
  const file = join(host.instancesPath, uuid, 'qemu.pid');
  return existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : undefined;
}

export function processAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/\) [ZX] /.test(stat);
  } catch {
    return false;
  }
}

export async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 15000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until the serial log shows a counter of at least `atLeast`; returns the last value. */
export async function waitTick(path: string, atLeast: number, timeoutMs = 15000): Promise<number> {
  await waitFor(`tick >= ${atLeast} in ${path}`, () => (lastTick(path) ?? -1) >= atLeast, timeoutMs);
  return lastTick(path) as number;
}

/** Parsed JSON log lines with the given message. */
export function logged(host: TestHost, msg: string): Array<Record<string, unknown>> {
  return host.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === msg);
}

/** Reads a range of a (stopped) disk with qemu-io, checking every byte is `pattern`; qemu-io's report. */
export function readPattern(disk: string, pattern: number, offset: string, length: string): string {
  return execFileSync('qemu-io', ['-r', '-f', 'qcow2', '-c', `read -P 0x${pattern.toString(16)} ${offset} ${length}`, disk], { encoding: 'utf8' });
}
