/**
 * `VirtDriver.swapVolume` for the qemu driver: a running guest's RBD volume disk moved onto
 * another volume while the guest runs (nova's libvirt driver does it with a block copy and pivot).
 *
 * Over QMP: the new volume's secret, rbd and raw nodes are added under temporary names (the
 * slot's own are the old volume's); `blockdev-mirror` (sync=full) copies the old raw node into the
 * new one (QEMU mirrors root nodes only), `BLOCK_JOB_READY`, then `job-complete` puts the new node
 * in the device (the mirror's default `replaces`: its source); the old nodes and secret are
 * removed. QEMU renames no node, and hot plug, detach and extend address the slot's names, so the
 * new image is opened again under them and a second mirror with nothing to copy (sync=none, the
 * same image) puts them in the device; the temporary ones go. A failure before the first job
 * completes cancels it and removes what was added: the guest keeps the old disk. A failure in the
 * renaming only leaves temporary names until the guest's next start (logged). A stopped guest only
 * gets the new definition. The definition is saved last.
 *
 * It is not: Cinder's part (the flow's), connection info validation (`volumes.ts`), or hot plug
 * (`volume-hotplug.ts`).
 */
import { DriverError } from '../errors';
import type { AttachedVolume, InstanceRef } from '../types';
import { volumeBlockdevs, volumeIds } from './cmdline';
import type { QemuHost } from './context';
import { QmpCommandError } from './errors';
import type { RbdVolumeDefinition } from './instance-files';
import type { Managed } from './instances';
import { settledInstance } from './lifecycle';
import { checkRbdSecrets } from './rbd-secrets';
import { rbdSecretFile, rbdVolumeDefinition } from './volumes';

/** How long the copy may take to reach BLOCK_JOB_READY (a full copy of the volume). */
export const SWAP_READY_TIMEOUT_MS = 60 * 60 * 1000;

/** The swap failed; the guest keeps the old volume's disk and nothing of the new one is left in QEMU. */
export class VolumeSwapError extends DriverError {
  constructor(instance: string, oldVolume: string, newVolume: string, why: string, cause: unknown) {
    super(`instance ${instance}: swapping volume ${oldVolume} for ${newVolume} failed at ${why}; the guest keeps ${oldVolume}`, { cause });
  }
}

/** The names the new volume's nodes have while the old one holds the slot's. */
function swapIds(slot: number): { readonly secret: string; readonly storage: string; readonly format: string; readonly job: string } {
  return { secret: `vol${slot}-swap-secret`, storage: `vol${slot}-swap-storage`, format: `vol${slot}-swap-format`, job: `vol${slot}-swap` };
}

/** A removal whose failure only QEMU's "not there" can be. */
async function quietly(m: Managed, command: string, args: Record<string, unknown>): Promise<void> {
  await m.vm!.execute(command, args).catch((e: unknown) => {
    if (!(e instanceof QmpCommandError)) throw e;
  });
}

/** The secret object and the rbd and raw nodes of `vol` under the names `ids`, as [command, arguments, its removal]. */
function nodes(host: QemuHost, vol: RbdVolumeDefinition, ids: { readonly secret: string; readonly storage: string; readonly format: string }): Array<[string, Record<string, unknown>, [string, Record<string, unknown>]]> {
  const [storage, format] = volumeBlockdevs(vol);
  const secret: Array<[string, Record<string, unknown>, [string, Record<string, unknown>]]> =
    vol.secretUuid === null ? [] : [['object-add', { 'qom-type': 'secret', id: ids.secret, file: rbdSecretFile(host.opts.rbdSecretsDir, vol.secretUuid), format: 'base64' }, ['object-del', { id: ids.secret }]]];
  return [
    ...secret,
    ['blockdev-add', { ...storage, 'node-name': ids.storage, ...('key-secret' in storage ? { 'key-secret': ids.secret } : {}) }, ['blockdev-del', { 'node-name': ids.storage }]],
    ['blockdev-add', { ...format, 'node-name': ids.format, file: ids.storage }, ['blockdev-del', { 'node-name': ids.format }]],
  ];
}

/** Resolves on the job's `want` event; rejects when the job ends first, with an error, or not in time. Wrapped, so the caller arms it before the command. */
async function jobEvent(m: Managed, job: string, want: 'BLOCK_JOB_READY' | 'BLOCK_JOB_COMPLETED', timeoutMs: number): Promise<{ readonly done: Promise<void> }> {
  const qmp = await m.vm!.qmp();
  const mine = { timeoutMs, match: (e: { data: Record<string, unknown> }) => e.data.device === job };
  const ended = qmp.waitEvent('BLOCK_JOB_COMPLETED', mine).then((e) => {
    if (typeof e.data.error === 'string') throw new Error(`the copy failed: ${e.data.error}`);
    if (want === 'BLOCK_JOB_READY') throw new Error('the copy ended before it was ready');
  });
  const cancelled = qmp.waitEvent('BLOCK_JOB_CANCELLED', mine).then(() => {
    throw new Error('the copy was cancelled');
  });
  const ready = want === 'BLOCK_JOB_READY' ? qmp.waitEvent('BLOCK_JOB_READY', mine).then(() => undefined) : ended;
  const first = Promise.race([ready, ended, cancelled]);
  for (const p of [ready, ended, cancelled, first]) p.catch(() => undefined);
  return { done: first };
}

/**
 * `blockdev-mirror` of root node `device` into `target`, READY, `job-complete`, COMPLETED: the
 * target then stands where the device's node stood. A failure cancels the job (QEMU keeps the
 * target in use until it has ended). @throws Error naming the step
 */
async function mirror(host: QemuHost, m: Managed, job: string, device: string, target: string, sync: 'full' | 'none', readyTimeoutMs: number): Promise<void> {
  const vm = m.vm!;
  let started = false;
  let at = 'blockdev-mirror';
  try {
    // Armed before the command: a copy with nothing to copy is ready before QEMU answers it.
    const ready = await jobEvent(m, job, 'BLOCK_JOB_READY', readyTimeoutMs);
    await vm.execute('blockdev-mirror', { 'job-id': job, device, target, sync });
    started = true;
    at = 'BLOCK_JOB_READY';
    await ready.done;
    at = 'job-complete';
    const completed = await jobEvent(m, job, 'BLOCK_JOB_COMPLETED', host.opts.qmpTimeoutMs);
    await vm.execute('job-complete', { id: job });
    await completed.done;
  } catch (e) {
    if (started) {
      const gone = await jobEvent(m, job, 'BLOCK_JOB_COMPLETED', host.opts.qmpTimeoutMs).catch(() => ({ done: Promise.resolve() }));
      await quietly(m, 'block-job-cancel', { device: job, force: true });
      await gone.done.catch(() => undefined);
    }
    throw new Error(`${at}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

/** Adds `list` in order; a failure removes what was added. @throws the failure */
async function addAll(m: Managed, list: ReturnType<typeof nodes>): Promise<Array<[string, Record<string, unknown>]>> {
  const undo: Array<[string, Record<string, unknown>]> = [];
  for (const [command, args, remove] of list) {
    try {
      await m.vm!.execute(command, args);
    } catch (e) {
      await removeAll(m, undo);
      throw new Error(`${command} ${String(args['node-name'] ?? args.id)}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    undo.push(remove);
  }
  return undo;
}

async function removeAll(m: Managed, added: ReadonlyArray<[string, Record<string, unknown>]>): Promise<void> {
  for (const [c, a] of [...added].reverse()) await quietly(m, c, a);
}

/** Copies `old`'s disk onto `next` in the running guest and moves the guest onto it. @throws VolumeSwapError (the guest keeps `old`) */
async function mirrorOnto(host: QemuHost, m: Managed, uuid: string, old: RbdVolumeDefinition, next: RbdVolumeDefinition, readyTimeoutMs: number): Promise<void> {
  const ids = volumeIds(old.slot);
  const tmp = swapIds(old.slot);
  let added: Array<[string, Record<string, unknown>]> = [];
  try {
    added = await addAll(m, nodes(host, next, tmp));
    await mirror(host, m, tmp.job, ids.format, tmp.format, 'full', readyTimeoutMs);
  } catch (e) {
    await removeAll(m, added);
    throw new VolumeSwapError(uuid, old.volumeId, next.volumeId, e instanceof Error ? e.message : String(e), e);
  }
  // The guest is on the new volume. The old nodes and secret go; the slot's names come back (hot
  // plug, detach and extend address them): the image opened again under them, and a mirror with
  // nothing to copy (the same image) puts them in the device's place. QEMU has no rename.
  for (const [c, a] of nodes(host, old, ids).map(([, , remove]) => remove).reverse()) await quietly(m, c, a);
  let back: Array<[string, Record<string, unknown>]> = [];
  try {
    back = await addAll(m, nodes(host, next, ids));
    await mirror(host, m, tmp.job, tmp.format, ids.format, 'none', host.opts.qmpTimeoutMs);
    await removeAll(m, added);
  } catch (e) {
    await removeAll(m, back);
    // The data is on the new volume and the guest uses it; only the node names differ until its next start.
    host.log.warn({ instance: uuid, volume: next.volumeId, err: e instanceof Error ? e.message : String(e) }, 'volume swapped, but its nodes keep their temporary names until the guest restarts');
  }
}

/** `VirtDriver.swapVolume`. @throws DriverError (no such volume), VolumeSwapError (the guest keeps the old disk), the save's error */
export async function swapVolume(host: QemuHost, ref: InstanceRef, oldVolumeId: string, newVolume: AttachedVolume, readyTimeoutMs = SWAP_READY_TIMEOUT_MS): Promise<void> {
  await host.table.withLock(ref.uuid, async () => {
    const m = settledInstance(host, ref, 'swap a volume');
    const volumes = m.rec.vm.volumes ?? [];
    const old = volumes.find((v) => v.volumeId === oldVolumeId);
    if (old === undefined) {
      if (volumes.some((v) => v.volumeId === newVolume.volume_id)) return;
      throw new DriverError(`instance ${ref.uuid} has no volume ${oldVolumeId} attached; nothing to swap`);
    }
    const next: RbdVolumeDefinition = { ...rbdVolumeDefinition(ref.uuid, newVolume, old.slot), bootIndex: old.bootIndex };
    // The same image again (a replay after the guest moved, when Cinder keeps the old id): done.
    if (next.pool === old.pool && next.image === old.image) return;
    await checkRbdSecrets(ref.uuid, host.opts.rbdSecretsDir, [next]);
    const hot = m.vm !== undefined && (await m.vm.alive());
    if (hot) await mirrorOnto(host, m, ref.uuid, old, next, readyTimeoutMs);
    await host.table.save(m, { vm: { ...m.rec.vm, volumes: volumes.map((v) => (v.volumeId === oldVolumeId ? next : v)) } });
    host.log.info({ instance: ref.uuid, old: oldVolumeId, new: newVolume.volume_id, slot: old.slot, hot }, 'volume swapped');
  });
}
