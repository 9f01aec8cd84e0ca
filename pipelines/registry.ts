// Every pipeline the `agro` command knows, in dependency order (what `nightly` runs).
import type { Pipeline } from '../src/etl/pipeline.ts';
import { sicar } from './sicar/index.ts';

export const PIPELINES: Pipeline[] = [sicar];

export function findPipeline(name: string): Pipeline | undefined {
  return PIPELINES.find((p) => p.name === name);
}
