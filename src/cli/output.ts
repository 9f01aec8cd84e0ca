// What the CLI writes on stdout: results only, every line through the CPF mask; with
// --json exactly one JSON object (contract §1).
import { maskCpfsDeep, maskCpfsInText } from '../privacy.ts';

export function out(text: string): void {
  process.stdout.write(maskCpfsInText(text) + '\n');
}

export function printResult(json: boolean, obj: unknown, human: () => string): void {
  out(json ? JSON.stringify(maskCpfsDeep(obj)) : human());
}
