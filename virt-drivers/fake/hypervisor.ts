/**
 * The fake driver's hypervisor: instances in memory, with power states and the intermediate
 * states of cold and live migration, checked the way a real hypervisor would refuse an operation.
 *
 * It is: a deterministic state machine the compute manager's tests drive through the fake
 * driver. It is not: shared between hosts; a migration between two fake drivers is two
 * hypervisors each doing their half, exactly as with real hosts.
 */
import { readFileSync } from 'node:fs';
import { writeFileAtomic } from '../../lib/atomic-file';
import { InstanceExistsError, InstanceNotFoundError, InstanceStateError } from '../errors';
import type { Vif } from '../../model/network';
import type { ImageMeta } from '../../model/image-meta';
import type { Flavor, InstanceInfo, InstanceRef, InstanceSpec, PowerState } from '../types';

/** Where an instance is in a move, if anywhere. */
export type FakeTask = 'resized-away' | 'migrating-out' | 'migrated-out' | 'incoming';

export interface FakeInstance {
  readonly uuid: string;
  readonly name: string;
  powerState: PowerState;
  task?: FakeTask;
  flavor?: Flavor;
  allocations: InstanceSpec['allocations'];
  /** PCI address of the GPU its vGPUs are on (what libvirt would say about its mdevs). */
  gpu?: string;
  abortRequested?: boolean;
  /** Rescued: the image its rescue disk was made from. */
  rescueImage?: string;
  /** What the guest wrote to its serial console, one entry a line (power events, as a guest would print them). */
  console?: string[];
  /** Its NICs' VIFs (network_info), attach and detach included. */
  vifs?: Vif[];
  /** Its volumes: id -> the size the guest was last told (bytes; 0 until an extend), attach and detach included. */
  volumes?: Record<string, number>;
  /** Its image's properties, as the spec gave them (a guest agent answers when `hw_qemu_guest_agent`). */
  imageMeta?: ImageMeta;
  /** Account -> the password its guest agent last set. */
  passwords?: Record<string, string>;
}

/** Lines of console kept per instance. */
const CONSOLE_LINES = 1000;

export class FakeHypervisor {
  private readonly instances = new Map<string, FakeInstance>();
  /** The write in progress, if any. */
  private writing: Promise<void> | undefined;
  /** The write queued behind it, not yet started: a `save` now is covered by it. */
  private nextWrite: Promise<void> | undefined;

  /**
   * With `file`, instances are loaded from it now and written back by `save()` after every change,
   * so they survive an agent restart the way a real hypervisor's VMs do.
   */
  constructor(private readonly file?: string) {
    if (!file) return;
    let text: string | undefined;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      return; // none yet
    }
    const saved = JSON.parse(text) as FakeInstance[];
    for (const i of saved) this.instances.set(i.uuid, i);
  }

  /**
   * Persists the instances (no-op without a file); resolves once a write that began after this
   * call is on disk. Calls made while a write is in flight share the next one (group commit): the
   * file holds every instance, so one write covers every change made before it starts, and a
   * burst of spawns costs a few rewrites of the file instead of one per spawn.
   */
  save(): Promise<void> {
    const file = this.file;
    if (!file) return Promise.resolve();
    if (this.nextWrite) return this.nextWrite;
    const next = (this.writing ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => {
        // From here on, a change needs a write of its own: this one has taken its snapshot.
        this.nextWrite = undefined;
        this.writing = next;
        return writeFileAtomic(file, JSON.stringify([...this.instances.values()]), 0o600);
      })
      .finally(() => {
        if (this.writing === next) this.writing = undefined;
      });
    this.nextWrite = next;
    return next;
  }

  list(): InstanceInfo[] {
    return [...this.instances.values()]
      .filter((i) => i.task !== 'migrated-out')
      .map((i) => ({ uuid: i.uuid, name: i.name, powerState: i.powerState }))
      .sort((a, b) => a.uuid.localeCompare(b.uuid));
  }

  find(uuid: string): FakeInstance | undefined {
    return this.instances.get(uuid);
  }

  /** @throws InstanceNotFoundError */
  get(ref: InstanceRef): FakeInstance {
    const i = this.instances.get(ref.uuid);
    if (!i) throw new InstanceNotFoundError(ref.uuid);
    return i;
  }

  /** @throws InstanceExistsError */
  create(spec: InstanceSpec, powerState: PowerState, extra: Partial<FakeInstance> = {}): FakeInstance {
    if (this.instances.has(spec.uuid)) throw new InstanceExistsError(spec.uuid);
    const inst: FakeInstance = { uuid: spec.uuid, name: spec.name, powerState, flavor: spec.flavor, allocations: spec.allocations, vifs: [...(spec.network_info ?? [])], volumes: Object.fromEntries((spec.volumes ?? []).map((v) => [v.volume_id, 0])), ...(spec.image_meta ? { imageMeta: spec.image_meta } : {}), ...extra };
    this.instances.set(spec.uuid, inst);
    if (powerState === 'RUNNING') this.print(inst, 'booted');
    return inst;
  }

  /** Appends a line to the instance's console, as its guest would print it. */
  print(i: FakeInstance, event: string): void {
    i.console = [...(i.console ?? []), `fake guest ${i.name}: ${event}`].slice(-CONSOLE_LINES);
  }

  delete(uuid: string): void {
    this.instances.delete(uuid);
  }

  /** @throws InstanceNotFoundError, InstanceStateError when a move is in flight */
  settled(ref: InstanceRef, operation: string): FakeInstance {
    const i = this.get(ref);
    if (i.task) throw new InstanceStateError(i.uuid, i.task, operation);
    return i;
  }

  powerOn(ref: InstanceRef): void {
    const i = this.settled(ref, 'power on');
    if (i.powerState !== 'RUNNING') this.print(i, 'booted');
    i.powerState = 'RUNNING';
  }

  powerOff(ref: InstanceRef): void {
    const i = this.settled(ref, 'power off');
    if (i.powerState === 'RUNNING') this.print(i, 'powered off');
    i.powerState = 'SHUTDOWN';
  }

  reboot(ref: InstanceRef, type: 'soft' | 'hard'): void {
    const i = this.settled(ref, `${type} reboot`);
    if (type === 'soft' && i.powerState !== 'RUNNING') throw new InstanceStateError(i.uuid, i.powerState, 'soft reboot');
    this.print(i, `${type} reboot`);
    this.print(i, 'booted');
    i.powerState = 'RUNNING';
  }

  /**
   * Moves a settled instance from power state `from` to `to` for `operation` (pause, suspend and
   * their undoing), printing `event` on its console; already at `to` is fine.
   * @throws InstanceNotFoundError, InstanceStateError (neither `from` nor `to`)
   */
  setPower(ref: InstanceRef, operation: string, from: PowerState, to: PowerState, event: string): void {
    const i = this.settled(ref, operation);
    if (i.powerState === to) return;
    if (i.powerState !== from) throw new InstanceStateError(i.uuid, i.powerState, operation);
    this.print(i, event);
    i.powerState = to;
  }

  /** Source of a cold migration: stopped, kept until confirm or revert. */
  migrateOut(ref: InstanceRef): FakeInstance {
    const done = this.instances.get(ref.uuid);
    if (done?.task === 'resized-away') return done; // repeated after a crash: already done
    const i = this.settled(ref, 'migrate');
    i.powerState = 'SHUTDOWN';
    i.task = 'resized-away';
    return i;
  }

  /** Source, confirm: what is left goes (same-host resizes already replaced the record). */
  confirm(ref: InstanceRef): void {
    if (this.instances.get(ref.uuid)?.task === 'resized-away') this.instances.delete(ref.uuid);
  }

  /** Source, revert: the original comes back. */
  revert(ref: InstanceRef, powerOn: boolean): void {
    const i = this.get(ref);
    if (!i.task) return; // repeated after a crash: already reverted
    if (i.task !== 'resized-away') throw new InstanceStateError(i.uuid, i.task ?? i.powerState, 'revert a migration');
    delete i.task;
    i.powerState = powerOn ? 'RUNNING' : 'SHUTDOWN';
  }

  /** Destination of a cold migration (or the same host for a resize to the same host). */
  migrateIn(spec: InstanceSpec, powerOn: boolean): void {
    const existing = this.instances.get(spec.uuid);
    if (existing && !existing.task) return; // repeated after a crash: already here
    if (existing && existing.task !== 'resized-away') throw new InstanceExistsError(spec.uuid);
    this.instances.delete(spec.uuid);
    this.create(spec, powerOn ? 'RUNNING' : 'SHUTDOWN', existing?.gpu ? { gpu: existing.gpu } : {});
  }

  /** Destination of a live migration: a paused shell waiting for the guest. */
  receive(spec: InstanceSpec): void {
    if (this.instances.get(spec.uuid)?.task === 'incoming') return; // repeated after a crash
    this.create(spec, 'PAUSED', { task: 'incoming' });
  }
}
