/** Every subcommand, in the order `--help` lists them. Add a command by adding its module here. */
import type { CommandModule } from '../context';
import { checkConfigCommand } from './check-config';
import { discoverCommand } from './discover';
import { rpcCommand } from './rpc';
import { runCommand } from './run';
import { syncCommand } from './sync';

export const COMMANDS: readonly CommandModule[] = [runCommand, checkConfigCommand, discoverCommand, syncCommand, rpcCommand];
