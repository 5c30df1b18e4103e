/**
 * The tick guest: a 512-byte x86 boot sector that prints `tick NNNN` (a 4-digit hex counter) on
 * COM1 about once a second, waiting with `hlt` on the BIOS timer so it costs almost no CPU. The
 * counter lives in a register (BX), so a destination continuing the sequence after a live
 * migration proves the CPU state moved. It ignores ACPI, so a clean power off always times out.
 *
 * Source (GNU as, `.code16`; assembled once, bytes below, no assembler at test time):
 *
 *       cli; xor %ax,%ax; mov %ax,%ds; mov %ax,%ss; mov $0x7c00,%sp; sti
 *       xor %bx,%bx                      # the counter
 *   next:  mov $0x3f8,%dx; mov $msg,%si
 *   print: lodsb; test %al,%al; jz digits; out %al,%dx; jmp print
 *   digits: mov $4,%cx; mov %bx,%di
 *   hex:   rol $4,%di; mov %di,%ax; and $0xf,%al; add $'0',%al; cmp $'9',%al; jbe emit; add $39,%al
 *   emit:  out %al,%dx; loop hex
 *          mov $'\n',%al; out %al,%dx; inc %bx
 *          mov $18,%cx
 *   wait:  hlt; loop wait                # 18 timer ticks, about 1 s
 *          jmp next
 *   msg:   .asciz "tick "
 *
 * The image is padded to 1 MiB: SeaBIOS refuses to boot a disk of a single sector.
 */
import { readFileSync, writeFileSync } from 'node:fs';

const CODE =
  'fa31c08ed88ed0bc007cfb31dbbaf803be3e7cac84c07403eeebf8b9040089df' +
  'c1c70489f8240f04303c39760204 27eee2eeb00aee43b91200f4e2fdebcf7469' +
  '636b2000';

/** The 1 MiB raw disk image of the tick guest. */
export function tickImage(): Buffer {
  const img = Buffer.alloc(1024 * 1024);
  Buffer.from(CODE.replace(/\s+/g, ''), 'hex').copy(img, 0);
  img[510] = 0x55;
  img[511] = 0xaa;
  return img;
}

/** Writes the tick guest's image to `path`. */
export function writeTickImage(path: string): void {
  writeFileSync(path, tickImage());
}

/** Every counter value printed in a serial log, in order. */
export function ticks(serialLog: string): number[] {
  return [...serialLog.matchAll(/tick ([0-9a-f]{4})\n/g)].map((m) => parseInt(m[1] as string, 16));
}

/** The last counter value in a serial log file, or undefined when none was printed yet. */
export function lastTick(path: string): number | undefined {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  return ticks(text).at(-1);
}
