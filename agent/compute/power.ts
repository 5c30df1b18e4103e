/**
 * An instance's power on one host, as nova-compute runs it: `stop_instance`, `start_instance`,
 * `reboot_instance` (soft: the guest asked to shut down within the driver's timeout, then started,
 * hard past the timeout; hard: reset), `pause_instance` / `unpause_instance`, `suspend_instance` /
 * `resume_instance`, `trigger_crash_dump`, `get_console_output` (the serial console log, its last
 * `tail_length` lines), and the periodic power-state sync (nova's `_sync_power_states`: a guest
 * that stopped or died under an ACTIVE or PAUSED instance is reported shut off, a STOPPED instance
 * whose guest runs is stopped again).
 *
 * Each step is recorded before the driver acts, and reported through the transition table's rows
 * (`transitions.ts`). A driver failure clears the task and records the fault (nova's
 * `reverts_task_state` and `wrap_instance_fault`); a reboot that fails with the guest down puts the
 * instance in ERROR.
 *
 * Not here: build and delete (`lifecycle.ts`), the moves (`resize.ts`, `live.ts`).
 */
import { InstanceNotFoundError as DriverInstanceNotFound } from '../../virt-drivers/errors';
import { POWER_STATE, type PowerState } from '../../virt-drivers/types';
import type { InstanceRecord } from '../../model/instance';
import type { FlowContext } from './flow-context';
import { driverStep, putInError } from './flow-steps';
import type { RequestContext } from './ports';
import { allows, transition, type FlowStep } from './transitions';
import { errorText } from '../../lib/error-text';

export type PowerContext = Pick<FlowContext, 'locks' | 'require' | 'record' | 'save' | 'instances' | 'driver' | 'log' | 'notify'>;

/** nova's reboot types (`reboot_instance`'s `reboot_type`). */
export type RebootType = 'SOFT' | 'HARD';

/** What one power-state sync pass did, per instance it changed. */
export interface PowerSyncResult {
  readonly stopped: string[];
  readonly forcedOff: string[];
  readonly updated: string[];
}

/**
 * The last `lines` lines of `log` (nova's `_tail_log`: split on newlines; 0 gives nothing; null
 * the whole log), decoded as ASCII with each other byte replaced by U+FFFD, as nova decodes it.
 */
export function tailConsole(log: Buffer, lines: number | null): string {
  let out = log;
  if (lines !== null) {
    if (lines <= 0) return '';
    const parts: Buffer[] = [];
    let end = log.length;
    for (let i = log.length - 1; i >= -1 && parts.length < lines; i--) {
      if (i === -1 || log[i] === 0x0a) {
        parts.unshift(log.subarray(i + 1, end));
        end = i;
      }
    }
    out = Buffer.from(parts.map((p) => p.toString('latin1')).join('\n'), 'latin1');
  }
  let s = '';
  for (const b of out) s += b < 0x80 ? String.fromCharCode(b) : '\ufffd';
  return s;
}

export class PowerFlows {
  constructor(private readonly c: PowerContext) {}

  /** `stop_instance`: the guest shut down (`cleanShutdown`: within the driver's timeout, else at once); STOPPED. */
  stop(uuid: string, cleanShutdown: boolean, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'stop', ['power_off.start', 'power_off.end', 'power_off.revert'], ctx, (rec) => this.c.driver.powerOff(rec, cleanShutdown ? {} : { timeoutSec: 0 }));
  }

  /** `start_instance`: the guest started; ACTIVE. */
  start(uuid: string, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'start', ['power_on.start', 'power_on.end', 'power_on.revert'], ctx, (rec) => this.c.driver.powerOn(rec));
  }

  /** `pause_instance`: the guest's vCPUs stopped where they are; PAUSED. */
  pause(uuid: string, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'pause', ['pause.start', 'pause.end', 'pause.revert'], ctx, (rec) => this.c.driver.pause(rec));
  }

  /** `unpause_instance`: the guest runs on; ACTIVE. */
  unpause(uuid: string, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'unpause', ['unpause.start', 'unpause.end', 'unpause.revert'], ctx, (rec) => this.c.driver.unpause(rec));
  }

  /** `suspend_instance`: the guest's state saved on this host, no process left; SUSPENDED. */
  suspend(uuid: string, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'suspend', ['suspend.start', 'suspend.end', 'suspend.revert'], ctx, (rec) => this.c.driver.suspend(rec));
  }

  /** `resume_instance`: the guest runs on from its saved state; ACTIVE. */
  resume(uuid: string, ctx: RequestContext): Promise<void> {
    return driverStep(this.c, uuid, 'resume', ['resume.start', 'resume.end', 'resume.revert'], ctx, (rec) => this.c.driver.resume(rec));
  }

  /** `trigger_crash_dump`: an NMI to the guest; no state changes (a failure records the fault). */
  crashDump(uuid: string, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      transition(rec, 'trigger_crash_dump.start');
      await c.notify(rec, 'trigger_crash_dump.start', ctx);
      try {
        await c.driver.triggerCrashDump(rec);
      } catch (e) {
        const fault = `crash dump failed: ${errorText(e)}`;
        c.log.warn({ instance: uuid, fault }, 'crash dump failed');
        await c.notify(rec, 'trigger_crash_dump.error', ctx, fault);
        return;
      }
      await c.notify(rec, 'trigger_crash_dump.end', ctx);
    });
  }

  /**
   * `reboot_instance`. A soft reboot of a guest that is not running is done hard, as nova's
   * libvirt driver does. A failure with the guest running leaves the instance ACTIVE with the
   * fault; with the guest down, ERROR.
   */
  reboot(uuid: string, type: RebootType, ctx: RequestContext): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.require(uuid);
      const soft = type === 'SOFT' && (await this.powerOf(rec)) === 'RUNNING';
      transition(rec, soft ? 'reboot.start' : 'reboot_hard.start');
      await c.save(rec);
      await c.notify(rec, soft ? 'reboot.start' : 'reboot_hard.start', ctx);
      try {
        await c.driver.reboot(rec, soft ? 'soft' : 'hard');
      } catch (e) {
        const fault = `reboot failed: ${errorText(e)}`;
        if ((await this.powerOf(rec)) !== 'RUNNING') {
          rec.power_state = POWER_STATE.SHUTDOWN;
          await putInError(c, rec, fault, ctx, 'reboot.error');
          return;
        }
        c.log.warn({ instance: uuid, fault }, 'reboot failed; the guest is running');
        rec.fault = fault;
        transition(rec, 'reboot.end');
        await c.save(rec);
        await c.notify(rec, 'reboot.end', ctx, fault);
        return;
      }
      transition(rec, 'reboot.end');
      await c.save(rec);
      await c.notify(rec, 'reboot.end', ctx);
    });
  }

  /** `get_console_output`: the last `tailLength` lines of the serial console (all without). @throws InstanceNotFoundError */
  async consoleOutput(uuid: string, tailLength: number | null): Promise<string> {
    const rec = this.c.require(uuid);
    return tailConsole(await this.c.driver.getConsoleOutput(rec), tailLength);
  }

  /**
   * One pass of nova's `_sync_power_states` over the instances with no task and no move: the
   * driver's power state is recorded; an ACTIVE instance whose guest is shut down or crashed is
   * stopped (STOPPED, shut down, reported); a STOPPED one whose guest runs is powered off. A guest
   * gone from the hypervisor is logged and left alone, as nova leaves it. Never throws.
   */
  async syncPowerStates(ctx: RequestContext): Promise<PowerSyncResult> {
    const out: PowerSyncResult = { stopped: [], forcedOff: [], updated: [] };
    for (const { uuid } of this.c.instances()) {
      await this.syncOne(uuid, ctx, out).catch((e: unknown) => this.c.log.warn({ instance: uuid, reason: errorText(e) }, 'power-state sync of the instance failed; next pass retries'));
    }
    return out;
  }

  private syncOne(uuid: string, ctx: RequestContext, out: PowerSyncResult): Promise<void> {
    const c = this.c;
    return c.locks.with(uuid, async () => {
      const rec = c.record(uuid);
      if (!rec || !allows(rec, 'power_sync.state')) return;
      const power = await this.powerOf(rec);
      if (power === undefined) {
        c.log.warn({ instance: uuid, vm_state: rec.vm_state }, 'instance not found on the hypervisor; power-state sync leaves it');
        return;
      }
      if ((rec.vm_state === 'active' || rec.vm_state === 'paused') && (power === 'SHUTDOWN' || power === 'CRASHED')) {
        // nova stops it through its API: the driver cleans up what the guest left, then STOPPED.
        await c.driver.powerOff(rec, { timeoutSec: 0 }).catch((e: unknown) => c.log.warn({ instance: uuid, reason: errorText(e) }, 'power off of a guest that is down failed'));
        await this.report(rec, 'power_sync.stopped', ctx);
        c.log.warn({ instance: uuid, power, vm_state: rec.vm_state }, 'the guest of a running instance is down; instance stopped');
        out.stopped.push(uuid);
        return;
      }
      if (rec.vm_state === 'stopped' && power === 'RUNNING') {
        await c.driver.powerOff(rec, { timeoutSec: 0 });
        c.log.warn({ instance: uuid }, 'the guest of a STOPPED instance was running; powered off');
        out.forcedOff.push(uuid);
        return;
      }
      if (POWER_STATE[power] !== rec.power_state) {
        rec.power_state = POWER_STATE[power];
        await this.report(rec, 'power_sync.state', ctx);
        out.updated.push(uuid);
      }
    });
  }

  private async report(rec: InstanceRecord, step: FlowStep, ctx: RequestContext): Promise<void> {
    transition(rec, step);
    await this.c.save(rec);
    await this.c.notify(rec, step, ctx);
  }

  /** The driver's power state of the guest; undefined when the hypervisor does not have it. */
  private powerOf(rec: InstanceRecord): Promise<PowerState | undefined> {
    return this.c.driver.getInfo(rec).then(
      (i) => i.powerState,
      (e: unknown) => (e instanceof DriverInstanceNotFound ? undefined : Promise.reject(e)),
    );
  }
}
