// Integration tests talk to real servers; their default timeout is generous (jest 29 has no
// per-project testTimeout).
jest.setTimeout(120000);
