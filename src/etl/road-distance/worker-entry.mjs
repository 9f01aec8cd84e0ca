// The worker thread's entry: TypeScript through tsx's loader, as bin/agro.mjs does it
// (a worker does not inherit the loader its parent registered).
import { register } from 'tsx/esm/api';

register();
await import('./worker.ts');
