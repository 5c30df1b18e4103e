/** Every subcommand, in the order `--help` lists them. Add a command by adding its module here. */
import type { CommandModule } from '../context';
import { checkConfigCommand } from './check-config';
import { rpcCommand } from './rpc';
import { runCommand } from './run';

export const COMMANDS: readonly CommandModule[] = [runCommand, checkConfigCommand, rpcCommand];
