/**
 * Virt drivers by name (`[DEFAULT] compute_driver`): a map from name to factory, Nomad-style, so
 * adding a driver is adding one registration, and a third-party driver registers itself the same
 * way before the agent starts.
 *
 * It is: construction only. It is not: lifecycle; the caller calls `init` on what it gets.
 */
import { DriverNotChosenError, UnknownDriverError } from './errors';
import type { VirtDriver } from './driver';
import type { DriverContext } from './types';

/** Builds a driver; must not touch the host (that is `init`'s job). */
export type DriverFactory = (ctx: DriverContext) => VirtDriver;

export class DriverRegistry {
  private readonly factories = new Map<string, DriverFactory>();

  /** Registers `factory` under `name`. @throws Error when the name is taken */
  register(name: string, factory: DriverFactory): this {
    if (this.factories.has(name)) throw new Error(`a virt driver named ${name} is already registered`);
    this.factories.set(name, factory);
    return this;
  }

  names(): string[] {
    return [...this.factories.keys()].sort();
  }

  /** A new, uninitialised driver. @throws DriverNotChosenError when `name` is unset, UnknownDriverError */
  create(name: string | undefined, ctx: DriverContext): VirtDriver {
    if (name === undefined) throw new DriverNotChosenError(this.names());
    const factory = this.factories.get(name);
    if (!factory) throw new UnknownDriverError(name, this.names());
    return factory(ctx);
  }
}

/**
 * A registry holding the built-in drivers. Each driver's modules load only when it is created:
 * a host runs one driver, and loading the others would cost resident memory for nothing (the qemu
 * driver and its schemas are about a fifth of the daemon's modules).
 */
export function builtinDrivers(): DriverRegistry {
  /* eslint-disable @typescript-eslint/no-require-imports -- a synchronous load on first use, see above */
  return new DriverRegistry()
    .register('fake', (ctx) => new (require('./fake/driver') as typeof import('./fake/driver')).FakeDriver(ctx))
    .register('qemu', (ctx) => new (require('./qemu/driver') as typeof import('./qemu/driver')).QemuDriver(ctx));
  /* eslint-enable @typescript-eslint/no-require-imports */
}
