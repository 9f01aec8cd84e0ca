// A webhook receiver for tests: a node http server on 127.0.0.1 answering each request with the
// next scripted status (the last one repeats; 'hang' never answers), keeping what it received.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

export async function receiver(script: (number | 'hang')[], extra: Record<string, string> = {}) {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      got.push({ headers: req.headers, body });
      const s = script[Math.min(got.length - 1, script.length - 1)];
      if (s === 'hang') return; // never answers
      res.writeHead(s, extra).end(s >= 400 ? 'nope' : 'ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return {
    url, got,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}
