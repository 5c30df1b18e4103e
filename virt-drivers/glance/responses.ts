/**
 * The Glance answers the client reads, as zod schemas holding exactly the fields it uses; other
 * fields are dropped by the parse.
 */
import { z } from 'zod';
import type { GlanceImage, ListedImage } from './api';

const optText = z.string().nullable().optional().transform((v) => (v === undefined || v === '' ? null : v));

/** `GET /v2/images/{id}` (Image API v2; `os_hash_algo`/`os_hash_value` from 2.7). */
export const imageAnswer = z
  .object({
    id: z.string().min(1),
    status: z.string().min(1),
    disk_format: optText,
    size: z.number().int().nonnegative().nullable().optional(),
    checksum: optText,
    os_hash_algo: optText,
    os_hash_value: optText,
  })
  .transform(
    (b): GlanceImage => ({
      id: b.id,
      status: b.status,
      diskFormat: b.disk_format,
      size: b.size ?? null,
      checksum: b.checksum,
      osHashAlgo: b.os_hash_algo,
      osHashValue: b.os_hash_value,
    }),
  );

/** The image record in `body`, or the first field that does not fit, as `field: reason`. */
export function parseImage(body: unknown): { image: GlanceImage } | { problem: string } {
  const r = imageAnswer.safeParse(body);
  return r.success ? { image: r.data } : { problem: firstProblem(r.error) };
}

/** The first issue of a failed parse, as `field: reason`. */
function firstProblem(error: z.ZodError): string {
  const issue = error.issues[0];
  const field = issue && issue.path.length > 0 ? issue.path.map(String).join('.') : '(body)';
  return `${field}: ${(issue?.message ?? 'does not fit').replace(/^Invalid input: /, '')}`;
}

/** `GET /v2/images`: the images' ids, statuses and creation times. */
const imageListAnswer = z.object({
  images: z.array(z.object({ id: z.string().min(1), status: z.string().min(1), created_at: z.string().min(1) })),
});

/** The images listed in `body`, or the first field that does not fit. */
export function parseImageList(body: unknown): { images: ListedImage[] } | { problem: string } {
  const r = imageListAnswer.safeParse(body);
  return r.success ? { images: r.data.images.map((i) => ({ id: i.id, status: i.status, createdAt: i.created_at })) } : { problem: firstProblem(r.error) };
}
