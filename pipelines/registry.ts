// Every pipeline the `agro` command knows, in dependency order (what `nightly` runs):
// reference and territorial layers first, so that each CAR state's overlaps are
// computed once against layers that are already current.
import type { Overlay } from '../src/etl/overlaps.ts';
import type { Pipeline } from '../src/etl/pipeline.ts';
import { carTitulares } from './car-titulares/index.ts';
import { cnucUcs } from './cnuc-ucs/index.ts';
import { dnitSnv } from './dnit-snv/index.ts';
import { funaiTis } from './funai-tis/index.ts';
import { ibamaEmbargos } from './ibama-embargos/index.ts';
import { icmbioEmbargos } from './icmbio-embargos/index.ts';
import { ibgeMunicipios } from './ibge-municipios/index.ts';
import { incraQuilombos } from './incra-quilombos/index.ts';
import { receitaCnpj } from './receita-cnpj/index.ts';
import { sicar } from './sicar/index.ts';
import { zarc } from './zarc/index.ts';

/**
 * The overlay of a pipeline not on the shape yet, attached here until its own declaration
 * carries it (then this wrapper goes).
 */
const withOverlay = (p: Pipeline, overlay: Omit<Overlay, 'dataset' | 'relation'>): Pipeline => ({ ...p, overlay: { ...overlay, dataset: p.name, relation: p.mainRelation } });

export const PIPELINES: Pipeline[] = [
  ibgeMunicipios,
  dnitSnv,
  funaiTis,
  cnucUcs,
  incraQuilombos,
  ibamaEmbargos,
  icmbioEmbargos,
  zarc,
  sicar,
  carTitulares,
  receitaCnpj,
];

export function findPipeline(name: string): Pipeline | undefined {
  return PIPELINES.find((p) => p.name === name);
}
