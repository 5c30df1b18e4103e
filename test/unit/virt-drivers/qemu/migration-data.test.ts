import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeExec } from '../../../helpers/fake-exec';
import { parseDiskInfo } from '../../../../virt-drivers/qemu/cold-migration';
import { fetchInstanceFiles, rsyncArgs, visibleLocally, type FetchRequest } from '../../../../virt-drivers/qemu/disk-transfer';
import { DiskTransferError, MigrationDataError } from '../../../../virt-drivers/qemu/errors';
import { writeRecord } from '../../../../virt-drivers/qemu/instance-files';
import { boolField, intField, nbdTarget, stringField, tcpUri, vmField } from '../../../../virt-drivers/qemu/live-data';
import { RECORD } from './record-fixture';

describe('live-migration data', () => {
  const vm = { machine: 'q35', accel: 'tcg', cpuModel: 'max', vcpus: 1, memoryMb: 32, disk: false };

  test('fields are checked and a missing or wrong one is named', () => {
    const data = { migrate_uri: 'tcp:127.0.0.1:49152', block_migration: true, disk_virtual_size: 1024, vm: JSON.stringify(vm), nbd_port: null };
    expect(stringField(data, 'migrate_uri')).toBe('tcp:127.0.0.1:49152');
    expect(boolField(data, 'block_migration')).toBe(true);
    expect(intField(data, 'disk_virtual_size')).toBe(1024);
    expect(vmField(data)).toEqual(vm);
    expect(nbdTarget(data)).toBeUndefined();
    expect(() => stringField(data, 'filename')).toThrow('migration data field filename: expected a non-empty string (set by an earlier live-migration step)');
    expect(() => intField({ n: -1 }, 'n')).toThrow(MigrationDataError);
    expect(() => vmField({ vm: '{' })).toThrow('migration data field vm: expected the JSON of a VM definition');
    expect(() => vmField({ vm: JSON.stringify({ ...vm, accel: 'hvf' }) })).toThrow(/field vm: expected a VM definition \(accel: /);
    expect(() => nbdTarget({ nbd_port: 49153 })).toThrow(/nbd_host/);
    expect(nbdTarget({ nbd_port: 49153, nbd_host: '::1', nbd_export: 'drive-disk0' })).toEqual({ host: '::1', port: 49153, export: 'drive-disk0' });
  });

  test('tcp URIs bracket IPv6 addresses', () => {
    expect(tcpUri('10.0.0.5', 49152)).toBe('tcp:10.0.0.5:49152');
    expect(tcpUri('2001:db8::5', 49152)).toBe('tcp:[2001:db8::5]:49152');
  });
});

describe('cold migration diskInfo and file transfer', () => {
  const info = {
    version: 1,
    driver: 'qemu',
    instance: RECORD.uuid,
    migration: 'm-1',
    source: { host: 'host-b', dir: '/srv/instances/x_resize' },
    files: ['instance.json', 'console.log', 'disk.qcow2'],
    disk: { file: 'disk.qcow2', virtual_size: 1073741824, image_ref: 'tick.img', backing_format: 'raw' },
  };

  test('diskInfo is parsed, and each bad field is named', () => {
    expect(parseDiskInfo(JSON.stringify(info))).toEqual(info);
    expect(parseDiskInfo(JSON.stringify({ ...info, disk: null })).disk).toBeNull();
    expect(() => parseDiskInfo('{')).toThrow('migration data field diskInfo: expected JSON written by the qemu driver');
    expect(() => parseDiskInfo(JSON.stringify({ ...info, version: 2 }))).toThrow(/diskInfo.version/);
    expect(() => parseDiskInfo(JSON.stringify({ ...info, source: { host: 'b' } }))).toThrow(/diskInfo.source.dir/);
    expect(() => parseDiskInfo(JSON.stringify({ ...info, files: ['../x'] }))).toThrow(/diskInfo.files/);
    expect(() => parseDiskInfo(JSON.stringify({ ...info, disk: { file: 'disk.qcow2' } }))).toThrow(/diskInfo.disk/);
  });

  function request(dir: string, into: string): FetchRequest {
    return { uuid: RECORD.uuid, migration: 'm-1', sourceDir: dir, sourceAddress: 'host-b.example', files: ['instance.json', 'console.log'], into };
  }

  test('auto fetches locally when the source copy of this migration is visible here, else by rsync over ssh', async () => {
    const root = mkdtempSync(join(tmpdir(), 'qemu-xfer-'));
    const src = join(root, 'src');
    const into = join(root, 'into');
    mkdirSync(src);
    mkdirSync(into);
    await writeRecord(src, { ...RECORD, task: 'resized-away', migration: 'm-1' });
    writeFileSync(join(src, 'console.log'), 'tick 0000\n');
    expect(await visibleLocally(request(src, into))).toBe(true);
    expect(await visibleLocally({ ...request(src, into), migration: 'm-2' })).toBe(false);
    const exec = new FakeExec();
    expect(await fetchInstanceFiles(exec, 'auto', request(src, into))).toBe('local');
    expect(readFileSync(join(into, 'console.log'), 'utf8')).toBe('tick 0000\n');
    expect(exec.calls).toEqual([]);

    const remote = request(join(root, 'elsewhere'), into);
    const e = await fetchInstanceFiles(exec, 'auto', remote).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(DiskTransferError);
    expect(exec.calls[0]?.file).toBe('rsync');
    expect(exec.calls[0]?.args).toEqual(rsyncArgs(remote));
  });

  test('the rsync command: archive, sparse, ssh in batch mode, only the listed files, IPv6 bracketed', () => {
    expect(rsyncArgs({ ...request('/srv/i/x_resize', '/srv/i/.x.incoming'), sourceAddress: '2001:db8::7' })).toEqual([
      '-a',
      '--sparse',
      '--timeout=120',
      '-e',
      'ssh -o BatchMode=yes',
      '--include=/instance.json',
      '--include=/console.log',
      '--exclude=*',
      '[2001:db8::7]:/srv/i/x_resize/',
      '/srv/i/.x.incoming/',
    ]);
  });
});
