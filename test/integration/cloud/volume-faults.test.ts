// Volume faults against the real services of scripts/cloud (nova 31,
// Cinder 2025.1 on Ceph, two agents in nova mode), each ended in a state checked in Cinder, in
// nova's API and in the guest:
// - Cinder's API stopped while an attach is in the guest, for longer than the agent's retries: the
//   attach is undone (the guest loses the disk again, nova's mapping goes), and the attachment
//   delete the agent owes Cinder is done once the API is back: the volume `available`, with no
//   attachment. Attached again, it works (nothing of the first try was left in QEMU).
// - The agent SIGKILLed mid-attach and started again: the attach ends whole (in use, one
//   attachment on the host, nova's mapping, the disk in the guest once) or not at all; a detach
//   then leaves the volume `available`.
// - A detach the guest never acknowledges (the tick guest ignores ACPI): after the agent's 20 s
//   wait the volume is in-use again with its one attachment and nova's mapping; the delete of the
//   server then gives it back.
// The window in which a fault strikes mid-attach is made by freezing the guest's QEMU (SIGSTOP):
// the agent's blockdev-add waits on it, after Cinder has the host's connector (the volume
// `attaching`); the fault comes, then QEMU goes on (SIGCONT).
//
// The cloud is shared with the other files of test/integration/cloud (test/helpers/cloud.ts).
import { execFileSync } from 'node:child_process';
import { SharedCloud, type ServerView } from '../../helpers/cloud';
import { diskEvents, type DiskEvent } from '../../helpers/net-guest';
import { neutronUnavailable } from '../../helpers/neutron-cloud';
import { HAVE_QEMU } from '../../helpers/qemu-hosts';
import { tickImage } from '../../helpers/tick-guest';
import { waitUntil } from '../../helpers/wait';

jest.setTimeout(900_000);
const log = (line: string): boolean => process.stdout.write(`cloud-volume-faults: ${line}\n`);

const unavailable = HAVE_QEMU ? neutronUnavailable() : 'qemu-system-x86_64 / qemu-img not installed';
if (unavailable) log(`skipped: ${unavailable}`);
const suite = unavailable ? describe.skip : describe;

interface Volume {
  id: string;
  status: string;
  attachments: Array<{ server_id: string; host_name: string | null }>;
}

suite('volume faults against the real services (scripts/cloud)', () => {
  let cloud: SharedCloud;
  let netImage = '';
  let tick = '';
  const servers: string[] = [];
  const volumes: string[] = [];

  const volume = async (id: string): Promise<Volume | undefined> => {
    const r = await cloud.call('cinder', 'GET', `/volumes/${id}`);
    return r.status === 404 ? undefined : (r.body.volume as Volume);
  };
  const volumeSettled = async (id: string, status: string, ms = 120_000): Promise<Volume> => {
    let v: Volume | undefined;
    await waitUntil(`volume ${id} is ${status}`, async () => (v = await volume(id))?.status === status, ms);
    return v as Volume;
  };
  /** The volumes nova lists as attached to server `id` (its block device mappings). */
  const novaAttached = async (id: string): Promise<string[]> =>
    (await cloud.must<Array<{ volumeId: string }>>('nova', 'GET', `/servers/${id}/os-volume_attachments`, undefined, 'volumeAttachments')).map((a) => a.volumeId);
  const disks = async (id: string): Promise<DiskEvent[]> => diskEvents(await cloud.consoleOf(id, 300));
  const qemuPid = (id: string): number => Number(execFileSync('pgrep', ['-f', `qemu-system.*${id}`], { encoding: 'utf8' }).trim().split('\n')[0]);
  const newVolume = async (name: string): Promise<string> => {
    const v = await cloud.must<{ id: string }>('cinder', 'POST', '/volumes', { volume: { name, size: 1 } }, 'volume');
    volumes.push(v.id);
    await volumeSettled(v.id, 'available');
    return v.id;
  };
  const boot = async (name: string, image: string, host: string): Promise<{ id: string; host: string }> => {
    const s = await cloud.must<{ id: string }>('nova', 'POST', '/servers', { server: { name, flavorRef: 'ca-net', imageRef: image, networks: 'none', host } }, 'server', '2.74');
    servers.push(s.id);
    const v = await cloud.settled<ServerView>(s.id, 'ACTIVE');
    return { id: s.id, host: v['OS-EXT-SRV-ATTR:host'] ?? '' };
  };
  /** Attaches `vol` to `server` with the guest's QEMU frozen; resolves once the agent waits on QEMU (Cinder has its connector). */
  const attachFrozen = async (server: string, vol: string): Promise<number> => {
    const pid = qemuPid(server);
    process.kill(pid, 'SIGSTOP');
    try {
      await cloud.must('nova', 'POST', `/servers/${server}/os-volume_attachments`, { volumeAttachment: { volumeId: vol } }, 'volumeAttachment', '2.79');
      await volumeSettled(vol, 'attaching', 60_000);
    } catch (e) {
      process.kill(pid, 'SIGCONT');
      throw e;
    }
    return pid;
  };
  const serial = (vol: string): string => vol.slice(0, 20);
  /** The agent's log line recording the failed attach of server `id` whose attachment delete it owes Cinder. */
  const owedLine = (host: string, id: string): string | undefined =>
    cloud.agentLog(host).split('\n').find((l) => l.includes(id) && l.includes('Cinder did not delete its attachment') && l.includes('the host deletes it once Cinder answers'));

  beforeAll(async () => {
    cloud = await SharedCloud.start(log);
    netImage = (await cloud.must<Array<{ id: string }>>('glance', 'GET', '/v2/images?name=net-guest', undefined, 'images'))[0]?.id ?? '';
    expect(netImage).not.toBe('');
    tick = await cloud.uploadImage(`tick-${Date.now()}`, tickImage(), 'raw');
  });

  afterAll(async () => {
    for (const id of servers) await cloud?.call('nova', 'DELETE', `/servers/${id}`).catch(() => undefined);
    for (const id of servers) await waitUntil(`server ${id} is gone`, async () => (await cloud.server(id)) === undefined, 120_000).catch(() => undefined);
    for (const id of volumes) await cloud?.call('cinder', 'DELETE', `/volumes/${id}`).catch(() => undefined);
    if (tick) await cloud?.call('glance', 'DELETE', `/v2/images/${tick}`).catch(() => undefined);
    await cloud?.stop();
  });

  let guest = { id: '', host: '' };

  test('Cinder’s API stopped during an attach, longer than the retries: undone in the guest and in nova; the attachment delete owed is done once the API is back, the volume available; attached again it works', async () => {
    const [hostA] = cloud.hosts;
    guest = await boot('faults-net', netImage, hostA ?? '');
    await waitUntil('the guest’s disk loop to run', async () => (await disks(guest.id)).some((e) => e.kind === 'seen'), 120_000);
    const vol = await newVolume('faults-cinder-down');
    let t = Date.now();
    const pid = await attachFrozen(guest.id, vol);
    const api = cloud.cinderApiPid();
    expect(api).toBeGreaterThan(0);
    process.kill(api, 'SIGTERM');
    await waitUntil('cinder-api to stop', () => Promise.resolve(cloud.cinderApiPid() === 0), 60_000);
    process.kill(pid, 'SIGCONT');
    try {
      // os-complete fails: the agent takes the disk out of the guest again and drops nova's mapping.
      await waitUntil('the guest to see the disk come and go', async () => (await disks(guest.id)).some((e) => e.kind === 'gone' && e.disk !== 'vda'), 120_000);
      await waitUntil('nova’s mapping to go', async () => !(await novaAttached(guest.id)).includes(vol), 120_000);
      // The attachment delete failed too, past the client's retries: the agent owes it (its fault says so).
      await waitUntil('the agent to owe the attachment delete', () => Promise.resolve(owedLine(guest.host, guest.id) !== undefined), 120_000);
      log(`attach undone with Cinder’s API down: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    } finally {
      await cloud.restartCinder();
    }
    t = Date.now();
    const after = await volumeSettled(vol, 'available', 120_000);
    log(`Cinder back to the owed attachment deleted: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    expect(after.attachments).toEqual([]);
    const s = await cloud.server(guest.id);
    expect(s).toMatchObject({ status: 'ACTIVE', 'OS-EXT-STS:task_state': null });

    // Nothing of the first try is left in QEMU: the same volume attaches again, the guest gets it.
    await cloud.must('nova', 'POST', `/servers/${guest.id}/os-volume_attachments`, { volumeAttachment: { volumeId: vol } }, 'volumeAttachment', '2.79');
    const inUse = await volumeSettled(vol, 'in-use');
    expect(inUse.attachments).toEqual([expect.objectContaining({ server_id: guest.id, host_name: guest.host })]);
    await waitUntil('the guest to see the disk again', async () => (await disks(guest.id)).filter((e) => e.kind === 'seen' && e.serial === serial(vol)).length === 2, 60_000);
    await cloud.must('nova', 'DELETE', `/servers/${guest.id}/os-volume_attachments/${vol}`);
    expect((await volumeSettled(vol, 'available')).attachments).toEqual([]);
  });

  test('the agent SIGKILLed mid-attach and started again: the attach ends whole or not at all, never half-made; a detach then frees the volume', async () => {
    const vol = await newVolume('faults-agent-killed');
    const pid = await attachFrozen(guest.id, vol);
    const agent = cloud.agentPid(guest.host);
    expect(agent).toBeGreaterThan(0);
    process.kill(agent, 'SIGKILL');
    await waitUntil('the agent to be gone', () => Promise.resolve(cloud.agentPid(guest.host) === 0), 30_000);
    process.kill(pid, 'SIGCONT');
    const t = Date.now();
    await cloud.restartAgent(guest.host);
    // It settles in one of the two clear states and stays there.
    let end: Volume | undefined;
    await waitUntil('the volume to settle', async () => ['in-use', 'available'].includes((end = await volume(vol))?.status ?? ''), 180_000);
    log(`agent restarted to the attach settled (${end?.status ?? '?'}): ${((Date.now() - t) / 1000).toFixed(1)} s`);
    const seen = async (): Promise<number> => (await disks(guest.id)).filter((e) => e.kind === 'seen' && e.serial === serial(vol)).length;
    if (end?.status === 'in-use') {
      expect(end.attachments).toEqual([expect.objectContaining({ server_id: guest.id, host_name: guest.host })]);
      expect(await novaAttached(guest.id)).toContain(vol);
      await waitUntil('the guest to see the disk', async () => (await seen()) >= 1, 60_000);
      expect(await seen()).toBe(1);
      await cloud.must('nova', 'DELETE', `/servers/${guest.id}/os-volume_attachments/${vol}`);
    } else {
      expect(end?.attachments).toEqual([]);
      expect(await novaAttached(guest.id)).not.toContain(vol);
    }
    expect((await volumeSettled(vol, 'available')).attachments).toEqual([]);
    expect(await novaAttached(guest.id)).not.toContain(vol);
    expect(await cloud.server(guest.id)).toMatchObject({ status: 'ACTIVE', 'OS-EXT-STS:task_state': null });
  });

  test('a detach the guest never acknowledges (the tick guest ignores ACPI): in-use again with its attachment and nova’s mapping; the server’s delete gives the volume back', async () => {
    const [, hostB] = cloud.hosts;
    const server = await boot('faults-tick', tick, hostB ?? '');
    const vol = await newVolume('faults-never-released');
    await cloud.must('nova', 'POST', `/servers/${server.id}/os-volume_attachments`, { volumeAttachment: { volumeId: vol } }, 'volumeAttachment', '2.79');
    await volumeSettled(vol, 'in-use');
    const t = Date.now();
    await cloud.must('nova', 'DELETE', `/servers/${server.id}/os-volume_attachments/${vol}`);
    await volumeSettled(vol, 'detaching', 10_000).catch(() => undefined);
    const back = await volumeSettled(vol, 'in-use', 180_000);
    log(`detach not acknowledged to in-use again: ${((Date.now() - t) / 1000).toFixed(1)} s`);
    expect(back.attachments).toEqual([expect.objectContaining({ server_id: server.id, host_name: server.host })]);
    // Asked 8 times, as nova's libvirt driver asks (`device_detach_attempts`), before giving up.
    expect(cloud.agentLog(hostB ?? '').split('\n').filter((l) => l.includes(server.id) && l.includes('the guest has not released the volume yet'))).toHaveLength(7);
    expect(await novaAttached(server.id)).toEqual([vol]);
    expect(await cloud.server(server.id)).toMatchObject({ status: 'ACTIVE', 'OS-EXT-STS:task_state': null });

    await cloud.must('nova', 'DELETE', `/servers/${server.id}`);
    await waitUntil('the server to be gone', async () => (await cloud.server(server.id)) === undefined, 120_000);
    expect((await volumeSettled(vol, 'available')).attachments).toEqual([]);
    expect(() => qemuPid(server.id)).toThrow();
  });
});
