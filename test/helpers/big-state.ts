// A generated SICAR state big enough that its COPY and normalise take a few seconds:
// room for a test to kill the process or stop the database in the middle.
import fs from 'node:fs';
import path from 'node:path';
import { PRJ_SIRGAS2000, ShapefileWriter, zipFiles } from '../../fixtures/lib/shapefile-writer.ts';
import { AREA_IMOVEL_FIELDS, carNumber } from '../../fixtures/sicar.ts';

/** Writes `<dir>/MT_AREA_IMOVEL.zip` with `n` 64-vertex properties around Sorriso. */
export async function writeBigState(dir: string, n: number): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  const base = path.join(dir, 'MT_AREA_IMOVEL');
  const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', fields: AREA_IMOVEL_FIELDS, encoding: 'utf8', cpg: 'UTF-8', prj: PRJ_SIRGAS2000 });
  for (let i = 0; i < n; i++) {
    const cx = -56 + (i % 400) * 0.01;
    const cy = -12 - Math.floor(i / 400) * 0.01;
    const ring: [number, number][] = [];
    for (let k = 0; k < 64; k++) ring.push([cx + 0.004 * Math.cos((2 * Math.PI * k) / 64), cy + 0.004 * Math.sin((2 * Math.PI * k) / 64)]);
    ring.push(ring[0]);
    await w.write({ type: 'Polygon', coordinates: [ring] }, {
      cod_imovel: carNumber('MT', '5107925', `big-${i}`), cod_estado: 'MT', municipio: 'Sorriso', num_area: 15, ind_status: 'AT',
      des_condic: 'Aguardando análise', ind_tipo: 'IRU', mod_fiscal: 0.2, dat_criaca: '01/02/2020', dat_atuali: '03/04/2021',
    });
  }
  const { files } = await w.close();
  await zipFiles(path.join(dir, 'MT_AREA_IMOVEL.zip'), files.map((f) => ({ path: f, name: path.basename(f) })));
  for (const f of files) fs.rmSync(f);
}
