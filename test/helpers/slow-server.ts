// A real HTTP server on loopback that serves one file in two halves: the first at once,
// the second when the test calls release() (a download caught in the middle).
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SlowServer {
  url: string;
  /** Resolves when a request has received the first half. */
  started: Promise<void>;
  release(): void;
  close(): Promise<void>;
}

export async function slowFileServer(file: string, name = 'file.zip'): Promise<SlowServer> {
  const body = fs.readFileSync(file);
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let started!: () => void;
  const startedP = new Promise<void>((r) => (started = r));
  const server = http.createServer((req, res) => {
    if (req.url !== `/${name}`) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/zip', 'content-length': String(body.length) });
    const half = Math.floor(body.length / 2);
    res.write(body.subarray(0, half), () => started());
    void released.then(() => res.end(body.subarray(half)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/${name}`,
    started: startedP,
    release,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}
