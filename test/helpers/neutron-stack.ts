/**
 * Small tools of the neutron-stack integration test: an ICMP echo client to run with python3 inside
 * a namespace (no ping binary is assumed on the machine or in the 2025.1 root), the resident memory
 * of a process tree, and the underlay-side name scripts/neutron-stack gives a host's veth.
 *
 * It is not: a Neutron client or a stack manager; scripts/neutron-stack is that.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';

/** ICMP echo from a namespace (no ping binary is assumed): prints how many of `count` were answered. */
export const PING = `
import os, socket, struct, sys, time
dst, count = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(1)
def csum(b):
    t = sum(struct.unpack('!%dH' % (len(b) // 2), b)); t = (t >> 16) + (t & 0xffff); t += t >> 16
    return ~t & 0xffff
ok, ident = 0, os.getpid() & 0xffff
for seq in range(count):
    body = b'x' * 32
    head = struct.pack('!BBHHH', 8, 0, 0, ident, seq)
    s.sendto(struct.pack('!BBHHH', 8, 0, csum(head + body), ident, seq) + body, (dst, 0))
    end = time.time() + 1
    while time.time() < end:
        try:
            data, addr = s.recvfrom(2048)
        except socket.timeout:
            break
        if addr[0] == dst and data[20] == 0 and struct.unpack('!HH', data[24:28]) == (ident, seq):
            ok += 1
            break
print(ok)
`;

/**
 * Python: pings argv[1] every argv[2] seconds until SIGTERM, then prints one character per echo,
 * '1' answered within the interval and '0' lost (so the test sees when the losses came).
 */
export const PING_WHILE = `
import os, signal, socket, struct, sys, time
dst, interval = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
def csum(b):
    t = sum(struct.unpack('!%dH' % (len(b) // 2), b)); t = (t >> 16) + (t & 0xffff); t += t >> 16
    return ~t & 0xffff
marks, ident, seq = [], os.getpid() & 0xffff, 0
while not stop:
    seq = (seq + 1) & 0xffff
    body = b'x' * 32
    head = struct.pack('!BBHHH', 8, 0, 0, ident, seq)
    s.sendto(struct.pack('!BBHHH', 8, 0, csum(head + body), ident, seq) + body, (dst, 0))
    end, got = time.time() + interval, '0'
    while not stop and time.time() < end:
        s.settimeout(max(end - time.time(), 0.001))
        try:
            data, addr = s.recvfrom(2048)
        except (socket.timeout, InterruptedError):
            continue
        if addr[0] == dst and data[20] == 0 and struct.unpack('!HH', data[24:28]) == (ident, seq):
            got = '1'
    marks.append(got)
    while not stop and time.time() < end:
        time.sleep(min(0.01, max(end - time.time(), 0)))
print(''.join(marks))
`;

/** Resident kB of a process and all its descendants. */
export function treeRssKb(rootPid: number): number {
  const rows = execFileSync('ps', ['-e', '-o', 'pid=,ppid=,rss='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/).map(Number));
  const inTree = new Set([rootPid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, ppid] of rows) {
      if (pid !== undefined && ppid !== undefined && inTree.has(ppid) && !inTree.has(pid)) {
        inTree.add(pid);
        grew = true;
      }
    }
  }
  return rows.filter(([pid]) => pid !== undefined && inTree.has(pid)).reduce((s, r) => s + (r[2] ?? 0), 0);
}

/** The underlay-side veth of host `name`: "ul" and the first 8 hex digits of sha1(name), as the script names it. */
export function underlayVeth(name: string): string {
  return `ul${createHash('sha1').update(name).digest('hex').slice(0, 8)}`;
}
