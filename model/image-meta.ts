/**
 * The image properties the agent acts on, with nova's names (`ImageMetaProps`): whether the guest
 * runs QEMU's guest agent, the account its admin password is for, whether snapshots must quiesce.
 *
 * nova-compute reads them from the build's `image` argument (its `properties`), and later from the
 * Instance's system metadata, where nova-api copied each property with an `image_` prefix when the
 * server was created. `imageMetaFrom` reads either. It is not: a validator of every property
 * (the others are nova's and the image's business, and are ignored here).
 */

export interface ImageMeta {
  /** `hw_qemu_guest_agent`: the guest gets the guest-agent channel, and qemu-ga in it answers. */
  readonly hw_qemu_guest_agent?: boolean;
  /** `os_admin_user`: the account `set_admin_password` sets (nova's default: root; Administrator on Windows). */
  readonly os_admin_user?: string;
  /** `os_require_quiesce`: a snapshot fails rather than be taken without the guest's filesystems frozen. */
  readonly os_require_quiesce?: boolean;
}

/** oslo's `bool_from_string` (what nova's FlexibleBooleanField takes): yes, true, on, y, t, 1 in any case; a JSON boolean as it is. */
function flexibleBool(v: unknown): boolean | undefined {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v === 1;
  if (typeof v !== 'string') return undefined;
  return ['1', 't', 'true', 'on', 'y', 'yes'].includes(v.trim().toLowerCase());
}

/**
 * The properties the agent acts on, from `props` (an image's `properties`, or an Instance's
 * system metadata with `prefix` 'image_'); undefined when none of them is set.
 */
export function imageMetaFrom(props: Readonly<Record<string, unknown>> | null | undefined, prefix = ''): ImageMeta | undefined {
  if (!props) return undefined;
  const agent = flexibleBool(props[`${prefix}hw_qemu_guest_agent`]);
  const quiesce = flexibleBool(props[`${prefix}os_require_quiesce`]);
  const user = props[`${prefix}os_admin_user`];
  const meta: ImageMeta = {
    ...(agent !== undefined ? { hw_qemu_guest_agent: agent } : {}),
    ...(typeof user === 'string' && user.trim() !== '' ? { os_admin_user: user.trim() } : {}),
    ...(quiesce !== undefined ? { os_require_quiesce: quiesce } : {}),
  };
  return Object.keys(meta).length > 0 ? meta : undefined;
}
