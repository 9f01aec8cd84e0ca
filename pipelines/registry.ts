// Every pipeline the `agro` command knows, in dependency order (what `nightly` runs):
// reference and territorial layers first, so that each CAR state's overlaps are
// computed once against layers that are already current.
import type { Pipeline } from '../src/etl/pipeline.ts';
import { dnitSnv } from './dnit-snv/index.ts';
import { ibgeMunicipios } from './ibge-municipios/index.ts';
import { sicar } from './sicar/index.ts';

export const PIPELINES: Pipeline[] = [ibgeMunicipios, dnitSnv, sicar];

export function findPipeline(name: string): Pipeline | undefined {
  return PIPELINES.find((p) => p.name === name);
}
