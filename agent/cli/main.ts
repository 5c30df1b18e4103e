#!/usr/bin/env node
/** Entry point of the `compute-agent` binary: real process I/O around `runCli`. */
import { runCli } from './program';

function stopSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals): void => resolve(sig);
    process.once('SIGTERM', on);
    process.once('SIGINT', on);
  });
}

runCli(process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  env: process.env,
  stopSignal,
  onReload: (fn) => {
    process.on('SIGHUP', fn);
  },
}).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`compute-agent: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
