// A worker thread of the road search (nearest-line-pool.ts): TypeScript runs through
// tsx's loader here as in bin/agro.mjs, then the typed worker loop takes over.
import { register } from 'tsx/esm/api';

register();
await import('./nearest-line-thread.ts');
