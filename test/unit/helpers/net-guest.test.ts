// The net guest's console lines as the integration tests read them (test/helpers/net-guest.ts):
// the exact forms scripts/net-guest prints, the `\r` a serial console may add, and lines that
// only look alike.
import { diskEvents, leases, pings } from '../../helpers/net-guest';

describe('net guest console lines', () => {
  const console = [
    'net-guest: init 6.1.0-56-cloud-amd64 up 2.01s',
    'udhcpc: lease of 10.77.0.42 obtained from 10.77.0.1, lease time 3600',
    'net-guest: lease 10.77.0.42/24 router 10.77.0.1 mtu 1442 mac 52:54:00:4e:47:01\r',
    'net-guest: ping 10.77.0.5 ok\r',
    'net-guest: ping 10.77.0.42 ok',
    'net-guest: ping 10.77.0.5 lost',
    'net-guest: ping 10.77.0.5 ok',
    'net-guest: ping 10.77.0.5 ok 10',
    'net-guest: ping 10.77.0.5 down',
    'net-guest: ping host.example ok',
    'xnet-guest: ping 10.77.0.6 ok',
  ].join('\n');

  it('pings(): every `net-guest: ping <ip> ok|lost` line, in order, and nothing else', () => {
    expect(pings(console)).toEqual([
      { ip: '10.77.0.5', state: 'ok' },
      { ip: '10.77.0.42', state: 'ok' },
      { ip: '10.77.0.5', state: 'lost' },
      { ip: '10.77.0.5', state: 'ok' },
    ]);
    expect(pings('')).toEqual([]);
  });

  it('leases() is not confused by the ping lines', () => {
    expect(leases(console)).toEqual([{ ip: '10.77.0.42', prefix: 24, router: '10.77.0.1', mtu: 1442, mac: '52:54:00:4e:47:01' }]);
  });

  it('diskEvents(): the disk loop lines as printed by a real guest, and nothing that only looks alike', () => {
    const lines = [
      'net-guest: disk vda serial none size 33554432',
      'net-guest: disk vda has no data block (too small)',
      'net-guest: disk vdb serial volume-one-serial-ab size 134217728\r',
      'net-guest: disk vdb wrote volume-o-f27737aa',
      'net-guest: disk vdb read volume-o-f27737aa\r',
      'net-guest: disk vdc size 209715200',
      'net-guest: disk vdc write failed',
      'net-guest: disk vdc gone',
      'net-guest: disk vdb seq 90',
      'net-guest: disk vdb seq lost: wrote 100 read 3\r',
      'net-guest: disk vdb seq',
      'net-guest: disk sda gone',
      'net-guest: disk vdc size',
      'net-guest: disk vdc read',
      'xnet-guest: disk vdc gone',
    ].join('\n');
    expect(diskEvents(lines)).toEqual([
      { disk: 'vda', kind: 'seen', serial: 'none', bytes: 33554432 },
      { disk: 'vda', kind: 'small' },
      { disk: 'vdb', kind: 'seen', serial: 'volume-one-serial-ab', bytes: 134217728 },
      { disk: 'vdb', kind: 'wrote', token: 'volume-o-f27737aa' },
      { disk: 'vdb', kind: 'read', token: 'volume-o-f27737aa' },
      { disk: 'vdc', kind: 'size', bytes: 209715200 },
      { disk: 'vdc', kind: 'write failed' },
      { disk: 'vdc', kind: 'gone' },
      { disk: 'vdb', kind: 'seq', seq: 90 },
      { disk: 'vdb', kind: 'seq lost', wrote: 100, read: 3 },
    ]);
    expect(diskEvents(console)).toEqual([]);
  });
});
