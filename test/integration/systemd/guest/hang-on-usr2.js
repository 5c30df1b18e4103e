// Test-only preload for the systemd guest test (loaded with `node --require` from the test's
// drop-in, never by the shipped unit): SIGUSR2 hangs the event loop for good, as a wedged probe or
// a runaway loop would, so the watchdog's keep-alives stop and systemd must kill and restart the
// service. Nothing in the agent itself knows about it.
'use strict';
process.on('SIGUSR2', () => {
  process.stderr.write('{"level":40,"msg":"test hook: event loop hung on SIGUSR2"}\n');
  for (;;) {
    // Spin: timers, I/O and keep-alives never run again.
  }
});
