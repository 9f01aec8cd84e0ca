// The methods each route path answers, so that a request with another method on a path that
// exists is 405 with `Allow` (RFC 9110 §15.5.6) rather than 404, which a client reads as "no
// such resource". Fed by an onRoute hook; patterns are fastify's (`:param` segments, `*`).
import type { RouteOptions } from 'fastify';

const segment = (s: string) => (s.startsWith(':') ? '[^/]+' : s === '*' ? '.*' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));

export class AllowedMethods {
  private readonly routes: { re: RegExp; methods: string[] }[] = [];

  add(route: RouteOptions): void {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).map((m) => m.toUpperCase());
    const re = new RegExp(`^${route.url.split('/').map(segment).join('/')}/?$`);
    this.routes.push({ re, methods });
  }

  /** The methods some route of `path` answers, sorted; empty: no route has this path. */
  of(path: string): string[] {
    const found = new Set<string>();
    for (const r of this.routes) if (r.re.test(path)) for (const m of r.methods) found.add(m);
    return [...found].sort();
  }
}
