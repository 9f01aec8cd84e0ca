// maskCpfsInSourceValues (src/privacy.ts): a report's example rows keep columns the pipeline does
// not know as read, and a DBF number field holding CPFs comes back from jsonb as a JSON number.
import { describe, expect, it } from 'vitest';
import { maskExampleValues } from '../src/etl/verdict-examples.ts';
import { maskCpfsInSourceValues } from '../src/privacy.ts';

describe('maskCpfsInSourceValues', () => {
  it('masks a CPF held as a number', () => {
    expect(maskCpfsInSourceValues({ cpf_resp: 52998224725 })).toEqual({ cpf_resp: '***.982.247-**' });
  });

  it('masks a CPF whose leading zeros the number lost (01234567890 read from an N(11) cell as 1234567890)', () => {
    // N(11,0) '01234567890' and '00123456797' are numbers without their zeros: about one CPF in ten starts with 0.
    expect(maskCpfsInSourceValues({ cpf_resp: 1234567890 })).toEqual({ cpf_resp: '***.345.678-**' });
    expect(maskCpfsInSourceValues([123456797])).toEqual(['***.234.567-**']);
  });

  it('leaves other numbers alone: shorter ones that are no CPF, amounts, fractions', () => {
    const values = { area: 1234567891, codigo: 5300108, ha: 5000.75, n: 0 };
    expect(maskCpfsInSourceValues(values)).toEqual(values);
  });

  it("a stored report's examples: their values masked, not their row numbers (a 9-digit row passing the check digits is a row)", () => {
    const examples = { other_state: [{ source: 'x.dbf', row: 123456797, values: { cpf_resp: 123456797 }, lon: -47.9, lat: -15.8 }] };
    expect(maskExampleValues(examples)).toEqual({ other_state: [{ source: 'x.dbf', row: 123456797, values: { cpf_resp: '***.234.567-**' }, lon: -47.9, lat: -15.8 }] });
  });
});
