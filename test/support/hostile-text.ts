/**
 * Seeded random texts made of `pieces` (markers, brackets, line starts a renderer acts on), for fuzzing the Markdown
 * renderers: the same texts on every run, so a failure names one that can be tried again.
 */
export function* hostileTexts(pieces: readonly string[], rounds: number, maxPieces: number, seed = 7): Generator<string> {
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  for (let round = 0; round < rounds; round++) {
    let text = "";
    for (let k = next() % maxPieces; k >= 0; k--) text += pieces[next() % pieces.length];
    yield text;
  }
}
